/** The run's randomness, from `--seed`: the same seed sends the same requests in the same order. */
export class Random {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A number in [0, 1) (mulberry32). */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** A whole number in [0, n). */
  below(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** `length` characters of lower-case letters and digits. */
  text(length: number): string {
    const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
    let text = '';
    for (let i = 0; i < length; i++) text += alphabet[this.below(alphabet.length)];
    return text;
  }
}
