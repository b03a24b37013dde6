/**
 * anywidget entry: the explorer inside a live notebook output.
 *
 * Layer: front-end entry; imports the core and the host interface. Python
 * (`thunder_viz.widget.ExplorerWidget`) owns the synced traits mirrored by `WidgetModel`; the
 * front end only reads them and asks for reruns with a custom message.
 */
import type { AnyModel, RenderProps } from "@anywidget/types";
import { mount } from "./explorer";
import { HOST_PROPERTY, OUTPUT_CLASS, UnpackedDocument, type ExplorerHost } from "./host";

/** The traits of the Python widget class (thunder_viz/widget.py), as synced to the browser. */
export interface WidgetModel {
  /** The trace document (docs/trace-schema.md), packed (packed.ts) or plain. */
  doc: unknown;
  /** "ready", "running…", ... */
  status: string;
  /** Names the widget: the views of one widget share one explorer (see `render`). */
  explorer_id: string;
}

/** The custom message the front end sends; Python recompiles and reruns with these executors. */
export interface RerunMessage {
  type: "rerun";
  executors: string[];
}

/** The custom message asking Python to profile the function (`ExplorerWidget.profile`). */
export interface ProfileMessage {
  type: "profile";
}

/** How long a rerun waits for the kernel's first answer (its "running…" status) before saying so. */
export const ANSWER_TIMEOUT_MS = 4000;
export const NO_ANSWER =
  "error: no answer from the kernel: it may be busy, restarted or shut down (run the cell again for a live explorer)";
/** ipywidgets' event when the widget's connection to its kernel comes or goes (a restart, a shutdown). */
const COMM_LIVE_UPDATE = "comm_live_update";

/**
 * The live widget's host. A rerun whose request reaches no kernel (ipywidgets drops messages of a
 * widget whose kernel is gone) would otherwise wait forever: the status says so when the
 * connection drops while it waits, or when no answer came within `answerTimeoutMs`.
 */
export function modelHost(
  model: AnyModel<WidgetModel>,
  answerTimeoutMs: number = ANSWER_TIMEOUT_MS,
): ExplorerHost {
  const listeners = new Set<() => void>();
  let unanswered: string | null = null;
  let waiting = false; // a rerun was asked for and has not finished
  let timer: ReturnType<typeof setTimeout> | undefined;
  const notify = (): void => listeners.forEach((l) => l());
  const shown = new UnpackedDocument(notify);
  const answered = (): void => {
    clearTimeout(timer); // the kernel got the request
    unanswered = null;
    if (!/running/i.test(model.get("status"))) waiting = false;
    shown.set(model.get("doc")); // notifies now, or once a packed document is unpacked
    notify();
  };
  const giveUp = (): void => {
    clearTimeout(timer);
    if (!waiting) return;
    waiting = false;
    unanswered = NO_ANSWER;
    notify();
  };
  const ask = (message: RerunMessage | ProfileMessage): void => {
    unanswered = null;
    waiting = true;
    clearTimeout(timer);
    timer = setTimeout(giveUp, answerTimeoutMs);
    model.send(message);
  };
  shown.set(model.get("doc"));
  return {
    getDocument: () => shown.document,
    getStatus: () => unanswered ?? model.get("status"),
    subscribe(listener) {
      if (listeners.size === 0) {
        model.on("change:doc", answered);
        model.on("change:status", answered);
        model.on(COMM_LIVE_UPDATE, giveUp);
      }
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
        if (listeners.size > 0) return;
        clearTimeout(timer);
        model.off("change:doc", answered);
        model.off("change:status", answered);
        model.off(COMM_LIVE_UPDATE, giveUp);
      };
    },
    requestRerun(executors) {
      const message: RerunMessage = { type: "rerun", executors };
      ask(message);
    },
    requestProfile() {
      const message: ProfileMessage = { type: "profile" };
      ask(message);
    },
  };
}

/** A live explorer and the element it is mounted in, which moves between the views of one widget. */
interface LiveExplorer {
  holder: HTMLElement;
  host: ExplorerHost;
  unmount: () => void;
}

/** The live explorer of each widget, by its `explorer_id`. */
const explorers = new Map<string, LiveExplorer>();

/**
 * Python updates the widget's display after each rerun (so that a saved notebook holds the latest
 * runs), and JupyterLab then renders the output again: a new view of the same widget, while the old
 * one is taken off the page. The new view adopts the explorer the old one showed, with what the
 * user did in it (step, expanded scopes, zoom, selection), instead of starting over. A second view
 * of a widget that is still on the page (the same widget displayed twice) gets its own explorer.
 */
function render({ model, el }: RenderProps<WidgetModel>): () => void {
  const key = model.get("explorer_id") || "";
  let live = key ? explorers.get(key) : undefined;
  if (!live || live.holder.isConnected) {
    const holder = el.ownerDocument.createElement("div");
    holder.className = "thunder-explorer-holder";
    const host = modelHost(model);
    live = { holder, host, unmount: mount(holder, host) };
    if (key) explorers.set(key, live);
  }
  const mine = live;
  el.append(mine.holder);
  // "Open Trace Explorer in New Tab" (plugin.ts) finds the output by its class and opens this host
  el.classList.add(OUTPUT_CLASS);
  Object.defineProperty(el, HOST_PROPERTY, { value: mine.host, configurable: true });
  return () => {
    delete (el as unknown as Record<string, unknown>)[HOST_PROPERTY];
    if (!el.contains(mine.holder)) return; // adopted by a newer view
    mine.unmount();
    if (explorers.get(key) === mine) explorers.delete(key);
  };
}

export default { render };
