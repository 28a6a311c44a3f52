import type { z } from 'zod';
import { seconds } from '../core/settingsSchema';

/**
 * The campaign layer's part of the configuration (design §3, §6.9); `config` assembles
 * it with the other layers' parts.
 */

/** Campaigns (design §6.9). */
export interface CampaignConfig {
  /** Between a campaign's ticks: how soon a start follows an ended migration, or a pause its request. */
  tickSeconds: number;
}

/** The profile-table variables campaigns read (core/profiles gives their defaults). */
export const campaignProfileShape = {
  ROUTELOCK_CAMPAIGN_TICK_SECONDS: seconds(1),
};

/** The campaign layer's settings from its parsed variables (no check among them beyond their own). */
export function campaignLayerSettings(c: z.infer<z.ZodObject<typeof campaignProfileShape>>): CampaignConfig {
  return { tickSeconds: c.ROUTELOCK_CAMPAIGN_TICK_SECONDS };
}
