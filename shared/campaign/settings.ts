import type { z } from 'zod';
import { seconds } from '../core/settingsSchema';

/**
 * The campaign layer's part of the configuration (docs/design.md §3, §6.9); shared/config.ts assembles
 * it with the other layers' parts.
 */

/** Campaigns (docs/design.md §6.9). */
export interface CampaignConfig {
  /** Between a campaign's ticks: how soon a start follows an ended migration, or a pause its request. */
  tickSeconds: number;
}

/** The profile-table variables campaigns read (shared/core/profiles.ts gives their defaults). */
export const campaignProfileShape = {
  ROUTELOCK_CAMPAIGN_TICK_SECONDS: seconds(1),
};

/** The campaign layer's settings from its parsed variables (no check among them beyond their own). */
export function campaignLayerSettings(c: z.infer<z.ZodObject<typeof campaignProfileShape>>): CampaignConfig {
  return { tickSeconds: c.ROUTELOCK_CAMPAIGN_TICK_SECONDS };
}
