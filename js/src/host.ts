/**
 * What the explorer core needs from the page that embeds it (anywidget, a static HTML snapshot,
 * later a JupyterLab mime renderer).
 *
 * Layer: front-end core; imports the schema's constants and packed.ts. The document is handed
 * over as `unknown`: the core validates it (schema.ts) whatever the host.
 */
import { isPacked, unpackDocument } from "./packed";
import { SCHEMA_NAME, SCHEMA_VERSION } from "./schema";

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

/**
 * The property of an element holding a live explorer (the anywidget view's element) under which
 * its host is kept, so that the JupyterLab extension, a separate bundle, can open the same live
 * explorer in a tab.
 */
export const HOST_PROPERTY = "thunderExplorerHost";
/** The class of every element holding an explorer of an output (the context menu's selector). */
export const OUTPUT_CLASS = "thunder-explorer-output";

/**
 * A host for a fixed document (static HTML snapshot, saved notebook): nothing changes, no reruns.
 * A packed document (packed.ts) shows as an empty one, "unpacking…", until it is unpacked.
 */
export function staticHost(document: unknown, status = "static snapshot"): ExplorerHost {
  if (!isPacked(document)) {
    return {
      getDocument: () => document,
      getStatus: () => status,
      subscribe: () => () => {},
    };
  }
  let shown: unknown = { schema: SCHEMA_NAME, version: SCHEMA_VERSION, title: "", steps: [] };
  let line = "unpacking…";
  const listeners = new Set<() => void>();
  unpackDocument(document).then(
    (doc) => {
      shown = doc;
      line = status;
      listeners.forEach((l) => l());
    },
    (e: unknown) => {
      // an invalid document whose error says what went wrong
      shown = { schema: `an unreadable packed document (${String(e)})` };
      line = status;
      listeners.forEach((l) => l());
    },
  );
  return {
    getDocument: () => shown,
    getStatus: () => line,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
