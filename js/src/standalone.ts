/**
 * Standalone entry (IIFE) for the self-contained HTML snapshot: no kernel, no network.
 *
 * Layer: front-end entry; imports the core. The snapshot page inlines explorer.css and this
 * bundle, embeds the document as JSON, and calls
 * `window.ThunderExplorer.mount(element, documentObject, {interactive: false})`.
 */
import { mount as mountCore } from "./explorer";
import { staticHost, type ExplorerHost } from "./host";
import { SCHEMA_VERSION, validateDocument } from "./schema";

export interface StandaloneOptions {
  /** Always false in a snapshot: nothing can recompile. Kept for hosts that can. */
  interactive?: boolean;
  /** Called with the executors when `interactive` is true and the user asks for a rerun. */
  onRerun?: (executors: string[]) => void;
  status?: string;
}

function mount(
  element: HTMLElement,
  document: unknown,
  options: StandaloneOptions = {},
): () => void {
  const host: ExplorerHost = staticHost(document, options.status ?? "static snapshot");
  if (options.interactive && options.onRerun) host.requestRerun = options.onRerun;
  return mountCore(element, host);
}

const api = { mount, validateDocument, schemaVersion: SCHEMA_VERSION };

declare global {
  interface Window {
    ThunderExplorer: typeof api;
  }
}

window.ThunderExplorer = api;
