/**
 * anywidget entry: the explorer inside a live notebook output.
 *
 * Layer: front-end entry; imports the core and the host interface. Python
 * (`thunder_viz.widget.ExplorerWidget`) owns the synced traits mirrored by `WidgetModel`; the
 * front end only reads them and asks for reruns with a custom message.
 */
import type { AnyModel, RenderProps } from "@anywidget/types";
import { mount } from "./explorer";
import type { ExplorerHost } from "./host";

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

export function modelHost(model: AnyModel<WidgetModel>): ExplorerHost {
  return {
    getDocument: () => model.get("doc"),
    getStatus: () => model.get("status"),
    subscribe(listener) {
      const onChange = (): void => listener();
      model.on("change:doc", onChange);
      model.on("change:status", onChange);
      return () => {
        model.off("change:doc", onChange);
        model.off("change:status", onChange);
      };
    },
    requestRerun(executors) {
      const message: RerunMessage = { type: "rerun", executors };
      model.send(message);
    },
  };
}

function render({ model, el }: RenderProps<WidgetModel>): () => void {
  return mount(el, modelHost(model));
}

export default { render };
