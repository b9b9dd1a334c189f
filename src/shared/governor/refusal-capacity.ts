/** The fewest refusals whose counts of responses under way can tell a capacity. */
const CAPACITY_SAMPLES = 4;
/** How close together those counts must be: the lower quartile at least this share of the upper. */
const CAPACITY_SPREAD = 0.85;
/** How far below the window the capacity must be to be told from a window that was simply full. */
const CAPACITY_BELOW = 0.9;

/**
 * The capacity a round trip's refusals tell, or undefined: the responses this key had under way
 * at each refusal, when they agree (a key counts a response as under way a little after the
 * provider ended it, so the lower quartile) and are well below what it had in flight. Counts
 * that spread say the refusals came whatever the load; counts as high as the window say only
 * that the window was full.
 */
export function capacityOf(openAtRefusals: number[], inFlight: number): number | undefined {
  if (openAtRefusals.length < CAPACITY_SAMPLES) return undefined;
  const sorted = openAtRefusals.slice().sort((a, b) => a - b);
  const lower = sorted[Math.floor((sorted.length - 1) / 4)]!;
  const upper = sorted[Math.ceil(((sorted.length - 1) * 3) / 4)]!;
  if (lower < CAPACITY_SPREAD * upper || lower >= CAPACITY_BELOW * inFlight) return undefined;
  return lower;
}
