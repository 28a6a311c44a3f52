/**
 * `@routelock/participant`: the participant contract (routelock design §6.5) for a service that copies its
 * resources' data between regions when routelock migrates them. The team supplies `bulkCopy`,
 * `deltaCopy` and optionally `verify`, `preflight` and `onNotice`; the handler keeps the job rules,
 * polling, `Prefer: wait`, supersession, the caller check and the notice rules. See the package README.
 */
export { createParticipantHandler } from './handler';
export type { ParticipantHandler, ParticipantHttpAnswer, ParticipantHttpRequest } from './handler';
export type { CleanUpOrder, ParticipantJob, ParticipantOptions, RouteReader } from './options';
export type { CleanUp } from './notices';
export { handleNodeRequest, nodeListener, expressParticipant, fastifyParticipant } from './adapters';
export type { FastifyLike, FastifyReplyLike, FastifyRequestLike } from './adapters';
export { bearerTokenOf, loopbackCallerOnly } from './auth';
export type { Authenticate, CallerRequest } from './auth';
export { ParticipantError, ParticipantOptionError, isParticipantError, jobRefused } from './errors';
export type { ParticipantErrorCode } from '../core/errors';
export {
  type Job,
  type JobState,
  type JobStep,
  type PostContext,
  type PostDecision,
  type ResourceJobs,
  abandonMigration,
  describeJob,
  findJob,
  finishRun,
  knowsMigration,
  mayApply,
  postJob,
} from './jobTable';
export { JobBook, type JobBookOptions } from './jobBook';
export {
  type CopyStep,
  type EndNoticeRequest,
  type EndStep,
  type JobRequest,
  type ParticipantRequest,
  type ParticipantStep,
  type PreflightQuestion,
  type VerifyAnswer,
  isEndStep,
  jobKey,
  mayDeleteCopy,
  parseEndNotice,
  parseJobRequest,
  parsePreferWait,
} from '../core/participantWire';
export type { Location } from '../core/lock/document';
export type { RouteView } from '../core/lock/view';
