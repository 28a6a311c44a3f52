import { decide } from '../../shared/core/client';
import type { Location } from '../../shared/core/lock/document';
import { escalate, prelock, swap } from '../../shared/core/lock/rules';
import { type RouteView, routeView } from '../../shared/core/lock/view';
import { T0, productionTiming as cfg, seconds } from '../support/timing';
import { newLocationDocument } from '../../shared/core/lock/document';

/**
 * `decide()` compares full locations (region and account). A move between two accounts of
 * one region — the probe's own case — walked through its phases, asked from every place a service might
 * serve it from, in both the object and the string form.
 */

const SOURCE: Location = { region: 'westeurope' };
const TARGET: Location = { region: 'westeurope', account: 'chatweu02' };

function views(): { hardDelete: RouteView; swapped: RouteView } {
  let doc = prelock(
    newLocationDocument('conv-1', SOURCE),
    { migrationId: 'm-1', owner: 'o', target: TARGET, newToken: 'tok' },
    T0,
    cfg,
  ).doc;
  const go = Date.parse(doc.lock!.startsAt) + seconds(cfg.clockSkewSeconds);
  doc = escalate(doc, { token: 'tok', phase: 'hardDelete' }, go, cfg).doc;
  const hardDelete = routeView({ doc, etag: 'e1' }, go + 1, cfg);
  doc = escalate(doc, { token: 'tok', phase: 'write' }, go + seconds(60), cfg).doc;
  doc = swap(doc, { token: 'tok' }, go + seconds(70), cfg).doc;
  return { hardDelete, swapped: routeView({ doc, etag: 'e2' }, go + seconds(71), cfg) };
}

/** The negative control's comparison: region only, a location without an account matching any account. */
function oldDecide(view: RouteView, operation: 'write' | 'delete', serving: string | Location) {
  const location = view.location;
  const here =
    typeof serving === 'string'
      ? location.region === serving
      : location.region === serving.region &&
        (serving.account === undefined || location.account === serving.account);
  return here ? view.enforcement[operation] : 'notHere';
}

test('the pending target and the retired source are never served, in either form', () => {
  const { hardDelete, swapped } = views();
  for (const op of ['write', 'delete'] as const) {
    // before the swap the data lives at the source; the target account must not accept anything
    expect(decide(hardDelete, op, TARGET).kind).toBe('notHere');
    // after it the data lives at the target; the retired source must not accept anything
    expect(decide(swapped, op, SOURCE).kind).toBe('notHere');
    expect(decide(swapped, op, 'westeurope').kind).toBe('notHere');
    expect(decide(swapped, op, { region: 'westeurope' }).kind).toBe('notHere');
  }
  // and where the data lives, the phase's enforcement applies
  expect(decide(hardDelete, 'delete', SOURCE).kind).toBe('tombstone');
  expect(decide(hardDelete, 'delete', 'westeurope').kind).toBe('tombstone'); // a route without an account
  expect(decide(swapped, 'write', TARGET).kind).toBe('allow');
});

test('negative control: a region-only comparison lets the retired source write and delete', () => {
  const { swapped } = views();
  expect(oldDecide(swapped, 'write', 'westeurope')).toBe('allow');
  expect(oldDecide(swapped, 'delete', { region: 'westeurope' })).toBe('allow');
});
