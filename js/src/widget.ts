/**
 * anywidget entry: the explorer inside a live notebook output.
 *
 * Layer: front-end entry; imports the core and the host interface. Python
 * (`thunder_viz.widget.ExplorerWidget`) owns the synced traits mirrored by `WidgetModel`; the
 * front end only reads them and asks for reruns with a custom message.
 */
import type { AnyModel, RenderProps } from "@anywidget/types";
import { mount } from "./explorer";
import { HOST_PROPERTY, OUTPUT_CLASS, type ExplorerHost } from "./host";

/** The traits of the Python widget class (thunder_viz/widget.py), as synced to the browser. */
export interface WidgetModel {
  /** The trace document (docs/trace-schema.md) as a dict. */
  doc: unknown;
  /** "ready", "running…", ... */
  status: string;
}

/** The custom message the front end sends; Python recompiles and reruns with these executors. */
export interface RerunMessage {
  type: "rerun";
  executors: string[];
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
  const answered = (): void => {
    clearTimeout(timer); // the kernel got the request
    unanswered = null;
    if (!/running/i.test(model.get("status"))) waiting = false;
    notify();
  };
  const giveUp = (): void => {
    clearTimeout(timer);
    if (!waiting) return;
    waiting = false;
    unanswered = NO_ANSWER;
    notify();
  };
  return {
    getDocument: () => model.get("doc"),
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
      unanswered = null;
      waiting = true;
      clearTimeout(timer);
      timer = setTimeout(giveUp, answerTimeoutMs);
      model.send(message);
    },
  };
}

function render({ model, el }: RenderProps<WidgetModel>): () => void {
  const host = modelHost(model);
  // "Open Trace Explorer in New Tab" (plugin.ts) finds the output by its class and opens this host
  el.classList.add(OUTPUT_CLASS);
  Object.defineProperty(el, HOST_PROPERTY, { value: host, configurable: true });
  const unmount = mount(el, host);
  return () => {
    unmount();
    delete (el as unknown as Record<string, unknown>)[HOST_PROPERTY];
  };
}

export default { render };
