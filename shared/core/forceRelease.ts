import { type Actor, type ForceReleaseRequest, requestAuditRecords, toActor } from './audit';
import type { Clock } from './clock';
import { RouteLockError, isRouteLockError } from './errors';
import { checkedReleaseReason, lockInstance } from './lock/rules';
import { redactCredentials } from './redact';
import { liveLock } from './lock/state';
import { type RouteView, routeView } from './lock/view';
import type { Router } from './router';
import { forceReleaseRequestSubject, notFound } from './store/errors';
import type { AuditLedger } from './store/ports/audit';
import type { ForceReleaseRequests } from './store/ports/forceRelease';

/**
 * Force-release with two approvals (docs/design.md §7.2: stuck locks are what this is for).
 * One operator opens a request with a reason; it runs only when two distinct approvers, neither of them
 * the requester, have approved within one hour. The release is one conditional write that clears the
 * lock of the migration the request named, leaves the location alone, and is audited like every step.
 *
 * Identities are object ids (`Actor.id`: the Entra `oid` of the authenticated caller). Display names
 * are carried for people reading the ledger and never compared: one principal under three names is
 * still one principal.
 */

export const APPROVAL_WINDOW_MS = 60 * 60 * 1000;
export const REQUIRED_APPROVALS = 2;

export function openRequest(input: {
  id: string;
  resourceId: string;
  migrationId: string;
  lockInstance?: string;
  actor: Actor | string;
  reason: string;
  now: number;
}): ForceReleaseRequest & { migrationId: string } {
  const requester = toActor(input.actor);
  return {
    id: input.id,
    kind: 'forceReleaseRequest',
    resourceId: input.resourceId,
    migrationId: input.migrationId,
    ...(input.lockInstance ? { lockInstance: input.lockInstance } : {}),
    requestedBy: requester.id,
    ...(requester.name ? { requestedByName: requester.name } : {}),
    reason: input.reason,
    requestedAt: new Date(input.now).toISOString(),
    expiresAt: new Date(input.now + APPROVAL_WINDOW_MS).toISOString(),
    approvals: [],
    status: 'pending',
    releasedAt: null,
    version: 1,
  };
}

/**
 * Add an approval; `ready` once two distinct approvers (by object id) other than the requester have
 * approved in time.
 */
export function approveRequest<R extends ForceReleaseRequest>(
  request: R,
  by: Actor | string,
  now: number,
): { request: R; ready: boolean } {
  const approver = toActor(by);
  if (request.status === 'obsolete') {
    throw new RouteLockError(
      'InvalidTransition',
      `Force-release request ${request.id} is obsolete: the lock it was opened for is gone. Open a new one.`,
    );
  }
  if (request.status !== 'pending') {
    throw new RouteLockError('InvalidTransition', `Force-release request ${request.id} has already run.`);
  }
  if (now > Date.parse(request.expiresAt)) {
    throw new RouteLockError(
      'RequestExpired',
      `Force-release request ${request.id} expired at ${request.expiresAt}; open a new one.`,
    );
  }
  if (approver.id === request.requestedBy) {
    throw new RouteLockError('Forbidden', 'The requester cannot approve their own force-release.');
  }
  if (request.approvals.some((a) => a.actor === approver.id)) {
    throw new RouteLockError(
      'DuplicateApproval',
      `Object id ${approver.id} has already approved request ${request.id}.`,
    );
  }
  const approval = {
    actor: approver.id,
    ...(approver.name ? { name: approver.name } : {}),
    at: new Date(now).toISOString(),
  };
  const next = { ...request, approvals: [...request.approvals, approval] };
  return { request: next, ready: next.approvals.length >= REQUIRED_APPROVALS };
}

export interface ApprovalOutcome {
  request: ForceReleaseRequest;
  released: boolean;
  route?: RouteView;
}

export class ForceReleaseService {
  constructor(
    private readonly router: Router,
    private readonly audit: AuditLedger,
    private readonly requests: ForceReleaseRequests,
    private readonly clock: Clock,
    private readonly newId: () => string = () => `fr-${crypto.randomUUID()}`,
  ) {}

  async open(resourceId: string, by: Actor | string, reason: string): Promise<ForceReleaseRequest> {
    const actor = toActor(by);
    // The release-reason rule, before anything is read or stored: the request's reason is shown while
    // the lock is live (GET /api/ops/force-release/{id}) and becomes the release's reason.
    const checked = checkedReleaseReason(resourceId, reason) ?? '';
    const stored = await this.router.readAuthoritative(resourceId);
    const now = this.clock();
    const lock = liveLock(stored.doc, now);
    if (!lock)
      throw new RouteLockError(
        'NotLocked',
        `Resource ${resourceId} holds no live lock; nothing to release.`,
        { resourceId },
      );
    const request = openRequest({
      id: this.newId(),
      resourceId,
      migrationId: lock.migrationId,
      lockInstance: lockInstance(lock),
      actor,
      reason: checked,
      now,
    });
    await this.requests.create(request);
    await this.appendRecords(request, lock.migrationId);
    return request;
  }

  /** The request's records so far, each step appending all of them (requestAuditRecords says why). */
  private async appendRecords(request: ForceReleaseRequest, migrationId: string | null): Promise<void> {
    for (const record of requestAuditRecords(request, migrationId)) await this.audit.append(record);
  }

  /** A request, its reason redacted as `open` stores it (a request opened before that rule stored it raw). */
  async get(requestId: string): Promise<ForceReleaseRequest> {
    const request = await this.requests.get(requestId);
    if (!request) throw notFound(forceReleaseRequestSubject(requestId));
    return { ...request, reason: redactCredentials(request.reason) };
  }

  async approve(requestId: string, by: Actor | string): Promise<ApprovalOutcome> {
    const actor = toActor(by);
    const current = (await this.get(requestId)) as ForceReleaseRequest & { migrationId?: string };
    const now = this.clock();
    const { request, ready } = approveRequest(current, actor, now);
    let saved = await this.requests.save(request);
    await this.appendRecords(saved, current.migrationId ?? null);
    if (!ready) return { request: saved, released: false };
    let stored;
    try {
      stored = await this.router.forceRelease(saved.resourceId, {
        actor: [saved.requestedBy, ...saved.approvals.map((a) => a.actor)].join(','),
        reason: saved.reason,
        requestId: saved.id,
        ...(current.migrationId ? { migrationId: current.migrationId } : {}),
        ...(saved.lockInstance ? { lockInstance: saved.lockInstance } : {}),
      });
    } catch (error) {
      // The lock is gone: the approvals end with it, so none of them can ever release a later lock.
      if (isRouteLockError(error, 'NotLocked')) await this.requests.save({ ...saved, status: 'obsolete' });
      throw error;
    }
    saved = await this.requests.save({
      ...saved,
      status: 'released',
      releasedAt: new Date(this.clock()).toISOString(),
    });
    return { request: saved, released: true, route: routeView(stored, this.clock(), this.router.timing) };
  }
}
