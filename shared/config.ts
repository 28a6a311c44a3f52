import type { z } from 'zod';
import { campaignLayerSettings, campaignProfileShape, type CampaignConfig } from './campaign/settings';
import { deepFreeze } from './core/freeze';
import { type ProfileVariable, profiles } from './core/profiles';
import type { SecurityConfig } from './core/security/tokenKeys';
import type { AuthConfig, RegionsConfig, ServingProfile, StoreConfig, TimingConfig } from './core/settings';
import {
  ConfigError,
  type Env,
  accessShape,
  blankAsAbsent,
  coreEnvShape,
  coreProfileShape,
  coreSecretVariables,
  coreSettings,
  parseAccess,
  parseVariables,
  runsInAzure,
} from './core/settingsSchema';
import {
  type MigrationConfig,
  type OperationsConfig,
  migrationEnvShape,
  migrationLayerSettings,
  migrationProfileShape,
  migrationSecretVariables,
} from './migration/settings';

/**
 * Configuration, parsed once at start-up from the environment (design §3), over the defaults of the
 * profile table (core/profiles). The assembler: each layer owns its variables' schema and the
 * checks among them (core/settingsSchema, migration/settings, campaign/settings); this composes
 * them in layer order, so a lower layer's checks never need an upper layer's values. A bad value stops
 * start-up with a message that names the variable and the expected form.
 */

export type { AuthConfig, CacheTier, RegionsConfig, StoreConfig, TimingConfig } from './core/settings';
export type { SecurityConfig, TokenKeySource } from './core/security/tokenKeys';
export type { CampaignConfig } from './campaign/settings';
export type {
  MigrationConfig,
  OperationsConfig,
  ReconciliationConfig,
  TimingNumbers,
} from './migration/settings';
export type { Participant } from './migration/participants';
// The configuration's public surface, as the library has always exported it.
export { ConfigError, runsInAzure } from './core/settingsSchema';
export { COALESCE_GRACE_SHARE } from './core/inflight';
export { matchesResourcePattern, participantsFor } from './migration/participants';
export {
  MAX_MIGRATION_ATTEMPTS,
  simpleSchedulePeriodSeconds,
  timingInequalities,
  announcedInequalities,
} from './migration/settings';

export interface Config {
  timing: TimingConfig;
  store: StoreConfig;
  migration: MigrationConfig;
  campaign: CampaignConfig;
  operations: OperationsConfig;
  security: SecurityConfig;
  auth: AuthConfig;
  regions: RegionsConfig;
}

// Every profile-table variable belongs to exactly one layer's part.
const profileShape = {
  ...coreProfileShape,
  ...migrationProfileShape,
  ...campaignProfileShape,
} satisfies Record<ProfileVariable, z.ZodType>;

/** Every environment variable this schema reads (the Bicep and local settings are checked against it). */
export const configVariables: readonly string[] = [
  'ROUTELOCK_PROFILE',
  ...Object.keys(profileShape),
  ...Object.keys(coreEnvShape),
  ...Object.keys(accessShape),
  ...Object.keys(migrationEnvShape),
];

/** Never echoed in an error message: a bad value still names its variable, not its content. */
const secretVariables = new Set([...coreSecretVariables, ...migrationSecretVariables]);

/** ROUTELOCK_PROFILE, and the profile's defaults with the variables set over them. */
function profileOf(env: Env): { profile: ServingProfile; merged: Env } {
  const profile = env.ROUTELOCK_PROFILE?.trim() || 'production';
  if (profile !== 'production' && profile !== 'dev') {
    throw new ConfigError([`ROUTELOCK_PROFILE: expected "production" or "dev" (got "${profile}")`]);
  }
  const defaults = profiles[profile];
  const merged: Env = { ...defaults };
  for (const key of Object.keys(defaults)) {
    const value = env[key];
    if (value !== undefined && value.trim() !== '') merged[key] = value;
  }
  return { profile, merged };
}

/** Parse and check the whole configuration. Throws ConfigError naming every bad variable. */
export function parseConfig(env: Env = process.env): Config {
  const { profile, merged } = profileOf(env);
  const problems: string[] = [];
  const part = <S extends z.ZodRawShape>(shape: S, from: Env) => {
    const parsed = parseVariables(shape, from, secretVariables);
    problems.push(...parsed.problems);
    return parsed.data;
  };
  const coreTiming = part(coreProfileShape, merged);
  const migrationTiming = part(migrationProfileShape, merged);
  const campaignTiming = part(campaignProfileShape, merged);
  const coreEnv = part(coreEnvShape, blankAsAbsent(coreEnvShape, env));
  const access = parseAccess(env, profile, problems);
  const migrationEnv = part(migrationEnvShape, blankAsAbsent(migrationEnvShape, env));
  if (!coreTiming || !migrationTiming || !campaignTiming || !coreEnv || !access || !migrationEnv)
    throw new ConfigError(problems);

  const core = coreSettings(profile, coreTiming, coreEnv, env);
  const migration = migrationLayerSettings(migrationTiming, migrationEnv, {
    timing: core.timing,
    store: core.store,
    // The Functions host sets FUNCTIONS_WORKER_RUNTIME (func start too); in Azure it is always that host.
    host: runsInAzure(env) || Boolean(env.FUNCTIONS_WORKER_RUNTIME?.trim()) ? 'functions' : 'embedded',
    regionName: coreEnv.REGION_NAME,
  });
  problems.push(...core.problems, ...migration.problems);
  if (problems.length > 0) throw new ConfigError(problems);

  return deepFreeze({
    timing: core.timing,
    store: core.store,
    migration: migration.migration,
    campaign: campaignLayerSettings(campaignTiming),
    operations: migration.operations,
    security: { tokenKeys: core.tokenKeys },
    auth: access.auth,
    regions: access.regions,
  });
}

let loaded: Config | undefined;

/** The process-wide configuration, parsed on first use and never again. */
export function getConfig(): Config {
  loaded ??= parseConfig(process.env);
  return loaded;
}
