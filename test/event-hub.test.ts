import { getEventListeners } from 'node:events';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EventHub } from '../src/main/event-hub.js';

/** An emitted event, or the marker standing for the events a subscriber lost. */
type Item = { seq: number } | { dropped: number };

const withMarker = (maxQueued: number) =>
  new EventHub<Item>({ maxQueued, overflow: (dropped) => ({ dropped }) });

function emitRange(hub: EventHub<Item>, from: number, to: number): void {
  for (let seq = from; seq <= to; seq++) hub.emit({ seq });
}

/** Reads until the subscription ends; only for subscriptions already ended or closing. */
async function drain(subscription: AsyncIterableIterator<Item>): Promise<Item[]> {
  const items: Item[] = [];
  for await (const item of subscription) items.push(item);
  return items;
}

async function take(subscription: AsyncIterableIterator<Item>, count: number): Promise<Item[]> {
  const items: Item[] = [];
  for (let index = 0; index < count; index++) {
    const next = await subscription.next();
    if (next.done) throw new Error(`subscription ended after ${index} of ${count} reads`);
    items.push(next.value);
  }
  return items;
}

describe('EventHub abort listeners', () => {
  it('removes the listener from a long-lived signal however the subscription ends', async () => {
    const controller = new AbortController();
    const signal = controller.signal;
    const listeners = () => getEventListeners(signal, 'abort').length;
    const hub = new EventHub<Item>();

    const returned = hub.subscribe(signal);
    const broken = hub.subscribe(signal);
    const closed = hub.subscribe(signal);
    expect(listeners()).toBe(3);

    await returned.return!();
    expect(listeners()).toBe(2);

    hub.emit({ seq: 1 });
    for await (const item of broken) {
      expect(item).toEqual({ seq: 1 });
      break;
    }
    expect(listeners()).toBe(1);

    hub.close();
    expect(listeners()).toBe(0);
    // Closing still hands over what was queued before it.
    expect(await drain(closed)).toEqual([{ seq: 1 }]);
    expect(hub.subscriberCount).toBe(0);

    // Nothing is left on the signal by a subscription that could never start.
    hub.subscribe(signal);
    expect(listeners()).toBe(0);
    expect(signal.aborted).toBe(false);
  });

  it('removes every listener when the signal aborts, and adds none for an aborted one', async () => {
    const controller = new AbortController();
    const hub = new EventHub<Item>();
    const first = hub.subscribe(controller.signal);
    const second = hub.subscribe(controller.signal);
    const waiting = first.next();
    controller.abort();
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    expect(await waiting).toEqual({ value: undefined, done: true });
    expect(await drain(second)).toEqual([]);
    expect(hub.subscriberCount).toBe(0);

    const late = hub.subscribe(controller.signal);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    expect(hub.subscriberCount).toBe(0);
    expect(await late.next()).toEqual({ value: undefined, done: true });
  });
});

describe('EventHub queue bound', () => {
  it('gives a slow consumer an overflow marker with the count, then the newest events in order', async () => {
    const hub = withMarker(3);
    const slow = hub.subscribe();
    emitRange(hub, 1, 10);
    expect(await take(slow, 4)).toEqual([{ dropped: 7 }, { seq: 8 }, { seq: 9 }, { seq: 10 }]);

    // The count starts again after the marker: a queue that never fills gets none.
    emitRange(hub, 11, 12);
    expect(await take(slow, 2)).toEqual([{ seq: 11 }, { seq: 12 }]);

    emitRange(hub, 13, 20);
    hub.close();
    expect(await drain(slow)).toEqual([{ dropped: 5 }, { seq: 18 }, { seq: 19 }, { seq: 20 }]);
  });

  it('counts drops per subscriber: a consumer that keeps up loses nothing', async () => {
    const hub = withMarker(2);
    const slow = hub.subscribe();
    const fast = hub.subscribe();
    const seen: Item[] = [];
    for (let seq = 1; seq <= 6; seq++) {
      hub.emit({ seq });
      seen.push(...(await take(fast, 1)));
    }
    expect(seen).toEqual([1, 2, 3, 4, 5, 6].map((seq) => ({ seq })));
    hub.close();
    expect(await drain(slow)).toEqual([{ dropped: 4 }, { seq: 5 }, { seq: 6 }]);
    expect(await drain(fast)).toEqual([]);
  });

  it('without an overflow factory drops the oldest events and leaves no marker', async () => {
    const hub = new EventHub<Item>({ maxQueued: 2 });
    const slow = hub.subscribe();
    emitRange(hub, 1, 5);
    hub.close();
    expect(await drain(slow)).toEqual([{ seq: 4 }, { seq: 5 }]);
  });

  it('holds the default bound of 10,000 events when given no options', async () => {
    const hub = new EventHub<Item>();
    const slow = hub.subscribe();
    emitRange(hub, 1, 10_005);
    hub.close();
    const items = await drain(slow);
    expect(items).toHaveLength(10_000);
    expect(items[0]).toEqual({ seq: 6 });
    expect(items.at(-1)).toEqual({ seq: 10_005 });
  });

  it('a return() discards the queue and the pending marker', async () => {
    const hub = withMarker(1);
    const subscription = hub.subscribe();
    emitRange(hub, 1, 3);
    await subscription.return!();
    expect(await subscription.next()).toEqual({ value: undefined, done: true });
  });

  // The invariant, read off the sequence received: a read that returns event `seq` while
  // events up to `last` have been emitted shows the queue held seq..last at that moment.
  it('for any schedule of emits and reads, holds at most maxQueued events, drops only the oldest and reports every drop (fast-check)', async () => {
    const step = fc.oneof(
      fc.record({ emit: fc.integer({ min: 1, max: 25 }) }),
      fc.record({ read: fc.integer({ min: 1, max: 25 }) }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 8 }),
        fc.array(step, { maxLength: 30 }),
        async (maxQueued, steps) => {
          const hub = withMarker(maxQueued);
          const subscription = hub.subscribe();
          let emitted = 0;
          /** The last event received. */
          let received = 0;
          let delivered = 0;
          let lost = 0;
          const check = (event: Item, dropped: number) => {
            if (!('seq' in event)) throw new Error('two markers in a row');
            // Exactly the oldest were dropped, and only as many as a full queue had to.
            expect(event.seq).toBe(Math.max(received + 1, emitted - maxQueued + 1));
            expect(dropped).toBe(event.seq - received - 1);
            lost += dropped;
            delivered++;
            received = event.seq;
          };
          for (const action of steps) {
            if ('emit' in action) {
              emitRange(hub, emitted + 1, emitted + action.emit);
              emitted += action.emit;
              continue;
            }
            for (let index = 0; index < action.read && received < emitted; index++) {
              const [first] = await take(subscription, 1);
              if (first && 'dropped' in first) {
                const [event] = await take(subscription, 1);
                check(event!, first.dropped);
              } else check(first!, 0);
            }
          }
          hub.close();
          const rest = await drain(subscription);
          for (let index = 0; index < rest.length; index++) {
            const item = rest[index]!;
            if ('seq' in item) check(item, 0);
            else check(rest[++index]!, item.dropped);
          }
          // Every event emitted was either received or counted in a marker.
          expect(delivered + lost).toBe(emitted);
          expect(received).toBe(emitted);
        },
      ),
    );
  });
});
