import type { Window, WindowAnswer, WindowSample } from './concurrency.js';

/** A window whose size is a real number between 1 and its ceiling; the limit is its floor. */
export abstract class AdaptiveWindow implements Window {
  protected size: number;
  protected readonly ceiling: number;
  /** The window that still fills the account's known limits: no cut goes below it. */
  floor = 1;

  constructor(initial: number, ceiling: number) {
    this.ceiling = ceiling;
    this.size = Math.min(initial, ceiling);
  }

  get limit(): number {
    return Math.max(1, Math.floor(Math.min(this.ceiling, Math.max(this.size, this.floor))));
  }

  get refusalRate(): number {
    return 0;
  }

  get congested(): boolean {
    return false;
  }

  open(size: number): void {
    this.size = Math.min(this.ceiling, Math.max(this.size, size));
  }

  abstract sample(sample: WindowSample): boolean | undefined;

  answered(_answer: WindowAnswer): boolean | undefined {
    return undefined;
  }
}
