/**
 * Reconnection pacing shared by producers and UIs, the policy every askbus client follows
 * (proto/PROTOCOL.md, "Clients"): 50 ms doubling to 2 s, each delay drawn from its upper
 * half, so a restarted daemon is not hit by every client at the same instant.
 */

export interface ReconnectOptions {
  /** First delay after a failed attempt (default 50 ms). */
  initialDelayMs?: number;
  /** Longest delay between attempts (default 2000 ms). */
  maxDelayMs?: number;
}

export class Backoff {
  private next: number;
  private readonly initial: number;
  private readonly max: number;

  constructor(opts: ReconnectOptions = {}) {
    this.initial = Math.max(1, opts.initialDelayMs ?? 50);
    this.max = Math.max(this.initial, opts.maxDelayMs ?? 2000);
    this.next = this.initial;
  }

  /** The delay before the next attempt; each call doubles the following one, up to the max. */
  delay(): number {
    const d = this.next;
    this.next = Math.min(this.max, this.next * 2);
    // Jitter in [d/2, d]: spread out clients that lost the daemon at the same moment.
    return Math.round(d / 2 + (Math.random() * d) / 2);
  }

  reset(): void {
    this.next = this.initial;
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
