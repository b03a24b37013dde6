/**
 * What the explorer core needs from the page that embeds it (anywidget, a static HTML snapshot,
 * later a JupyterLab mime renderer).
 *
 * Layer: front-end core; imports packed.ts. The document is handed
 * over as `unknown`: the core validates it (schema.ts) whatever the host.
 */
import { isPacked, unpackDocument } from "./packed";

export interface ExplorerHost {
  /** The current trace document (parsed JSON or JSON text), untrusted. */
  getDocument(): unknown;
  /** A short status line from the host ("ready", "running…"); absent for static hosts. */
  getStatus?(): string;
  /** Calls `listener` when the document or status changes; returns an unsubscribe function. */
  subscribe(listener: () => void): () => void;
  /**
   * Recompiles and reruns the function with these executors (in priority order). Absent for
   * hosts with no kernel: the explorer then disables the executor toggles and says why.
   */
  requestRerun?(executors: string[]): void;
  /**
   * Profiles the function with the last inputs (`thunder_viz.profile`); the next document carries
   * the profile. Absent for hosts with no kernel.
   */
  requestProfile?(): void;
}

/**
 * The property of an element holding a live explorer (the anywidget view's element) under which
 * its host is kept, so that the JupyterLab extension, a separate bundle, can open the same live
 * explorer in a tab.
 */
export const HOST_PROPERTY = "thunderExplorerHost";
/** The class of every element holding an explorer of an output (the context menu's selector). */
export const OUTPUT_CLASS = "thunder-explorer-output";

/**
 * The plain document of whatever a host was last given: a packed one (packed.ts) is unpacked in
 * the background, and until then the previous document stays shown (none at first: the explorer
 * waits, and is not "ready", until there is one). `onShown` is called each time the shown
 * document changes. An older document that finishes unpacking after a newer one arrived is dropped.
 */
export class UnpackedDocument {
  private raw: unknown = undefined;
  private shown: unknown = undefined;
  private pending = false;

  constructor(private readonly onShown: () => void) {}

  get document(): unknown {
    return this.shown;
  }

  /** Whether a packed document is still being unpacked. */
  get unpacking(): boolean {
    return this.pending;
  }

  set(raw: unknown): void {
    if (raw === this.raw) return;
    this.raw = raw;
    if (!isPacked(raw)) {
      this.pending = false;
      this.shown = raw;
      this.onShown();
      return;
    }
    this.pending = true;
    const done = (doc: unknown): void => {
      if (this.raw !== raw) return; // a newer document arrived meanwhile
      this.pending = false;
      this.shown = doc;
      this.onShown();
    };
    unpackDocument(raw).then(done, (e: unknown) =>
      // an invalid document whose error says what went wrong
      done({ schema: `an unreadable packed document (${String(e)})` }),
    );
  }
}

/**
 * A host for a fixed document (static HTML snapshot, saved notebook): nothing changes, no reruns.
 * A packed document (packed.ts) shows as an empty one, "unpacking…", until it is unpacked.
 */
export function staticHost(document: unknown, status = "static snapshot"): ExplorerHost {
  const listeners = new Set<() => void>();
  const shown = new UnpackedDocument(() => listeners.forEach((l) => l()));
  shown.set(document);
  return {
    getDocument: () => shown.document,
    getStatus: () => (shown.unpacking ? "unpacking…" : status),
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
