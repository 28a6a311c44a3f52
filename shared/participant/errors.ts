import { type ParticipantErrorCode, errorKind } from '../core/errors';

/**
 * The participant SDK's typed errors: a stable `code` (the error table's participant codes) and
 * the status the handler answers with. A team's function throws `JobRefused` to answer 400; an
 * `authenticate` function throws `CallerUnauthenticated` (401), `CallerForbidden` (403) or
 * `CallerCheckUnavailable` (503, retried by routelock).
 */
export class ParticipantError extends Error {
  override readonly name = 'ParticipantError';
  readonly status: number;
  constructor(
    readonly code: ParticipantErrorCode,
    message: string,
  ) {
    super(message);
    this.status = errorKind(code).status;
  }
}

/** A request the team's function cannot serve as asked (a region it does not hold): 400 with the message. */
export const jobRefused = (message: string) => new ParticipantError('JobRefused', message);

/** `createParticipantHandler`: an option missing, unknown, of the wrong type or out of range. */
export class ParticipantOptionError extends ParticipantError {
  constructor(
    readonly option: string,
    rule: string,
  ) {
    super('InvalidParticipantOption', `createParticipantHandler: option ${option} ${rule}`);
  }
}

export const isParticipantError = (e: unknown): e is ParticipantError => e instanceof ParticipantError;
