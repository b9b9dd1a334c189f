/** The three buckets a key's governor keeps, by name. */
export type BucketName = 'requests' | 'input' | 'output';

/** What a shared store answers a lease: what it granted, and when the rest could be had. */
export interface LeaseGrant {
  granted: number;
  /** Ms until the part not granted would be there at the limit's rate (0 when all was). */
  waitMs: number;
}

/**
 * Token buckets held outside this process and shared by every process of a fleet (queue mode
 * keeps them in Redis). Each bucket refills at `limit` per minute; a lease takes from it.
 * Never rejects: a store that cannot answer grants nothing and names a wait.
 */
export interface SharedBucketStore {
  lease(key: string, bucket: BucketName, limit: number, want: number): Promise<LeaseGrant>;
}

/** A lease is this share of a minute's limit (about 1.2 s of it): few store calls, little hoarded. */
const LEASE_SHARE = 1 / 50;
/** How long to wait before asking again when a lease is in flight or the store is away. */
const POLL_MS = 100;

/**
 * One key's leases from a shared store: admissions take from what this process was granted, and
 * only when that runs short is the store asked for more (asynchronously; `wake` re-runs the key's
 * admission when a grant lands). With N processes, each holds at most about a lease of
 * each bucket beyond what it uses, so together they stay within the limit.
 */
export class SharedLeases {
  readonly #store: SharedBucketStore;
  readonly #key: string;
  readonly #wake: () => void;
  readonly #levels: Record<BucketName, number> = { requests: 0, input: 0, output: 0 };
  readonly #asking = new Set<BucketName>();
  /** When the store said the rest of a bucket would be there (epoch ms). */
  readonly #notBefore: Record<BucketName, number> = { requests: 0, input: 0, output: 0 };

  constructor(store: SharedBucketStore, key: string, wake: () => void) {
    this.#store = store;
    this.#key = key;
    this.#wake = wake;
  }

  /**
   * Ms until `amount` of `bucket` (limit `limit` per minute) is leased here; 0 means now. When it
   * is short, more is asked for, and `wake` is called once it lands.
   */
  waitFor(bucket: BucketName, amount: number, limit: number, now: number): number {
    // Nothing larger than a minute's limit can ever be granted at once: a full bucket is enough.
    const needed = Math.min(amount, limit);
    const level = this.#levels[bucket];
    if (level >= needed) return 0;
    if (this.#asking.has(bucket)) return POLL_MS;
    const notBefore = this.#notBefore[bucket];
    if (now < notBefore) return notBefore - now;
    const want = Math.ceil(Math.max(needed - level, limit * LEASE_SHARE));
    this.#asking.add(bucket);
    void this.#store.lease(this.#key, bucket, limit, want).then(
      (grant) => this.#landed(bucket, grant),
      () => this.#landed(bucket, { granted: 0, waitMs: POLL_MS }),
    );
    return POLL_MS;
  }

  #landed(bucket: BucketName, grant: LeaseGrant): void {
    this.#asking.delete(bucket);
    this.#levels[bucket] += grant.granted;
    this.#notBefore[bucket] = grant.waitMs > 0 ? Date.now() + grant.waitMs : 0;
    this.#wake();
  }

  /** An admission's cost, taken from the leases. */
  take(bucket: BucketName, amount: number): void {
    this.#levels[bucket] -= amount;
  }

  /** A correction: a refused attempt's cost back, or what a response cost beyond its charge. */
  adjust(bucket: BucketName, delta: number): void {
    if (Number.isFinite(delta)) this.#levels[bucket] += delta;
  }

  /** What is leased here now, per bucket (for tests and state). */
  get levels(): Readonly<Record<BucketName, number>> {
    return { ...this.#levels };
  }
}
