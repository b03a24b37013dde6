/**
 * Where layouts come from: a Web Worker when the page allows one, else the main thread.
 *
 * Layer: front-end core; imports the pure layout. The worker's code is a string that build.mjs
 * inlines (`__LAYOUT_WORKER_SOURCE__`), started from a Blob URL: no file to serve, no network.
 * A page that forbids workers (a strict Content-Security-Policy, a test DOM) falls back to the
 * synchronous engine, which gives the same cells.
 *
 * The first step asked for is laid out on the calling thread too when the steps up to it are
 * small (SYNC_NODES): the explorer would only wait for it, and the worker answers its first step
 * late (it must start and receive every step first), about 150 ms for a 12-layer GPT-2.
 */
import { LayoutEngine, type LayoutStepInput, type StepLayout } from "./layout";

declare const __LAYOUT_WORKER_SOURCE__: string | undefined;

/** If the worker has not answered by then, lay out on the main thread instead. */
const WORKER_TIMEOUT_MS = 3000;
/** At most this many nodes (in the steps up to the first one asked for) laid out right away. */
const SYNC_NODES = 20000;

export interface LayoutProvider {
  /** A step's cells: synchronously when already known, else a promise. */
  get(index: number): StepLayout | Promise<StepLayout>;
  dispose(): void;
}

/** Lays out lazily on the calling thread, steps in order up to the one asked for. */
class SyncLayoutProvider implements LayoutProvider {
  private readonly engine = new LayoutEngine();
  private readonly done: StepLayout[] = [];

  constructor(private readonly steps: LayoutStepInput[]) {}

  /** Whether `get(index)` is already known (costs nothing). */
  has(index: number): boolean {
    return index < this.done.length;
  }

  get(index: number): StepLayout {
    while (this.done.length <= index && this.done.length < this.steps.length) {
      this.done.push(this.engine.layoutStep(this.steps[this.done.length] as LayoutStepInput));
    }
    const layout = this.done[index];
    if (!layout) throw new RangeError(`no step ${index} to lay out`);
    return layout;
  }

  dispose(): void {}
}

class WorkerLayoutProvider implements LayoutProvider {
  private readonly results: StepLayout[] = [];
  private readonly waiting = new Map<number, ((l: StepLayout) => void)[]>();
  /** Lays out on this thread: the first step asked for, or everything once the worker failed. */
  private readonly local: SyncLayoutProvider;
  private failed = false;
  private asked = false;
  private readonly timer: ReturnType<typeof setTimeout>;

  constructor(
    private readonly worker: Worker,
    private readonly url: string,
    private readonly steps: LayoutStepInput[],
  ) {
    this.local = new SyncLayoutProvider(steps);
    worker.onmessage = (e: MessageEvent<StepLayout & { index: number }>) => {
      clearTimeout(this.timer);
      const { index, ids, layer, col } = e.data;
      this.results[index] = { ids, layer, col };
      for (const resolve of this.waiting.get(index) ?? []) resolve(this.results[index]);
      this.waiting.delete(index);
    };
    worker.onerror = () => this.fallBack();
    this.timer = setTimeout(() => this.fallBack(), WORKER_TIMEOUT_MS);
    worker.postMessage({ steps });
  }

  get(index: number): StepLayout | Promise<StepLayout> {
    const known = this.results[index];
    if (known) return known;
    const first = !this.asked;
    this.asked = true;
    if (this.failed || this.local.has(index) || (first && this.nodesUpTo(index) <= SYNC_NODES)) {
      return this.local.get(index);
    }
    return new Promise((resolve) => {
      const list = this.waiting.get(index);
      if (list) list.push(resolve);
      else this.waiting.set(index, [resolve]);
    });
  }

  private nodesUpTo(index: number): number {
    let n = 0;
    for (const step of this.steps.slice(0, index + 1)) n += step.nodes.length;
    return n;
  }

  private fallBack(): void {
    if (this.failed) return;
    this.failed = true;
    this.stopWorker();
    for (const [index, resolvers] of this.waiting) {
      const layout = this.local.get(index);
      for (const resolve of resolvers) resolve(layout);
    }
    this.waiting.clear();
  }

  private stopWorker(): void {
    clearTimeout(this.timer);
    this.worker.terminate();
    URL.revokeObjectURL(this.url);
  }

  dispose(): void {
    this.stopWorker();
    this.waiting.clear();
  }
}

/** A worker-backed provider when possible, else a synchronous one. */
export function createLayoutProvider(
  steps: LayoutStepInput[],
  options: { useWorker?: boolean } = {},
): LayoutProvider {
  const source = typeof __LAYOUT_WORKER_SOURCE__ === "string" ? __LAYOUT_WORKER_SOURCE__ : null;
  if (
    options.useWorker !== false &&
    source &&
    typeof Worker !== "undefined" &&
    typeof Blob !== "undefined"
  ) {
    let url: string | null = null;
    try {
      url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
      return new WorkerLayoutProvider(new Worker(url), url, steps);
    } catch {
      if (url) URL.revokeObjectURL(url);
    }
  }
  return new SyncLayoutProvider(steps);
}
