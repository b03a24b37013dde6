/**
 * What the explorer core needs from the page that embeds it (anywidget, a static HTML snapshot,
 * later a JupyterLab mime renderer).
 *
 * Layer: front-end core, imports nothing. The document is handed over as `unknown`: the core
 * validates it (schema.ts) whatever the host.
 */

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
}

/** A host for a fixed document (static HTML snapshot, saved notebook): nothing changes, no reruns. */
export function staticHost(document: unknown, status = "static snapshot"): ExplorerHost {
  return {
    getDocument: () => document,
    getStatus: () => status,
    subscribe: () => () => {},
  };
}
