/**
 * JupyterLab entry: the explorer in notebook outputs (saved or live) with no kernel, and a command
 * that opens an output's explorer in its own main-area tab.
 *
 * Layer: front-end entry; imports the core (explorer, host, schema) and JupyterLab's shared
 * packages (provided by JupyterLab at run time, never bundled). Two thin exports over one module:
 * `rendererExtension` (a mime renderer extension for `application/vnd.thunder.trace+json`) and
 * `commandsPlugin` (a front-end plugin for the command, the palette and the context menu, and
 * the saved explorer in place of a widget that cannot load with no kernel).
 * build.mjs bundles this file into `lib/plugin.js`, which `lib/mime.js` and `lib/extension.js`
 * re-export for JupyterLab's federated build. The document in an output is untrusted data (a
 * notebook can hold anything): it is only ever handed to the core, which validates it and renders
 * its strings as text; the renderer is therefore `safe` and also shows untrusted notebooks.
 */
import type { JupyterFrontEnd, JupyterFrontEndPlugin } from "@jupyterlab/application";
import { ICommandPalette } from "@jupyterlab/apputils";
import { INotebookTracker, type NotebookPanel } from "@jupyterlab/notebook";
import type { IRenderMime } from "@jupyterlab/rendermime-interfaces";
import type { Message } from "@lumino/messaging";
import { Panel, Widget } from "@lumino/widgets";
import { mount } from "./explorer";
import { HOST_PROPERTY, OUTPUT_CLASS, staticHost, type ExplorerHost } from "./host";
import { isPacked, packedFromHtml } from "./packed";
import { MIME_TYPE } from "./schema";

export { OUTPUT_CLASS };

export const TAB_CLASS = "thunder-explorer-tab";
export const OPEN_IN_TAB = "thunder-explorer:open-in-tab";
/** What the status line says: the output is shown from the notebook, nothing can rerun. */
export const SAVED_STATUS = "saved output";
const TITLE_CHARS = 60;
const WIDGET_VIEW = "application/vnd.jupyter.widget-view+json";

/** The document each rendered output shows, for the command (keyed by the output's node). */
const shown = new WeakMap<HTMLElement, unknown>();

/** One output: the read-only explorer of the document in the output's data. */
export class ExplorerRenderer extends Widget implements IRenderMime.IRenderer {
  private unmount: (() => void) | null = null;

  constructor(private readonly mimeType: string) {
    super();
    this.addClass(OUTPUT_CLASS);
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = outputDocument(model.data, this.mimeType);
    this.unmount?.();
    shown.set(this.node, data);
    this.unmount = mount(this.node, staticHost(data, SAVED_STATUS));
    return Promise.resolve();
  }

  override dispose(): void {
    if (this.isDisposed) return;
    this.unmount?.();
    this.unmount = null;
    super.dispose();
  }
}

/**
 * The document of an output: its JSON entry, or, where that says the packed document is stored
 * only in the output's HTML snapshot (thunder_viz/render/mime.py), the one the snapshot embeds.
 */
export function outputDocument(data: IRenderMime.IMimeModel["data"], mimeType: string): unknown {
  const entry: unknown = data[mimeType];
  if (!isPacked(entry) || typeof entry.data_in !== "string") return entry;
  const html: unknown = data[entry.data_in];
  try {
    if (typeof html === "string") return packedFromHtml(html) ?? entry;
  } catch {
    // an unreadable snapshot: the explorer says the document is invalid
  }
  return entry;
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [MIME_TYPE],
  defaultRank: 0,
  createRenderer: (options) => new ExplorerRenderer(options.mimeType),
};

export const rendererExtension: IRenderMime.IExtension = {
  id: "thunder-explorer:plugin",
  description: "Renders thunder trace documents as the read-only trace explorer.",
  rendererFactory,
  rank: 0,
  dataType: "json",
};

/** The title of a document for a tab, as plain text (Lumino sets it with textContent). */
export function tabTitle(doc: unknown): string {
  const title =
    doc && typeof doc === "object" && typeof (doc as { title?: unknown }).title === "string"
      ? (doc as { title: string }).title
      : "";
  const text = title.length > TITLE_CHARS ? `${title.slice(0, TITLE_CHARS - 1)}…` : title;
  return text ? `Trace: ${text}` : "Trace explorer";
}

/** A main-area tab; activating it focuses the explorer (so the shell tracks it, and keys work). */
class ExplorerTab extends Widget {
  protected override onActivateRequest(msg: Message): void {
    super.onActivateRequest(msg);
    const root = this.node.querySelector<HTMLElement>(".thunder-explorer");
    (root ?? this.node).focus();
  }
}

/**
 * A main-area widget showing the explorer of `host`, filling the tab: a saved output's document,
 * or a live widget's own host (the tab then reruns as the output does).
 */
export function explorerTab(host: ExplorerHost, id: string): Widget {
  const widget = new ExplorerTab();
  widget.id = id;
  widget.node.tabIndex = -1;
  widget.addClass(TAB_CLASS);
  widget.title.caption = host.requestRerun
    ? "thunder trace explorer"
    : "thunder trace explorer (read-only)";
  widget.title.closable = true;
  const retitle = (): void => {
    widget.title.label = tabTitle(host.getDocument()); // a packed document has its title once unpacked
  };
  retitle();
  const unsubscribe = host.subscribe(retitle);
  const unmount = mount(widget.node, host);
  widget.disposed.connect(() => {
    unsubscribe();
    unmount();
  });
  return widget;
}

/**
 * The output the command acts on: the one right-clicked (from the context menu; JupyterLab keeps
 * the last right-click's target, so only then), else the active cell's, else the first shown.
 */
function targetOutput(app: JupyterFrontEnd, fromContextMenu: boolean): HTMLElement | null {
  if (fromContextMenu) {
    const hit = app.contextMenuHitTest((node) => node.classList.contains(OUTPUT_CLASS));
    if (hit) return hit;
  }
  const current = app.shell.currentWidget?.node;
  if (!current) return null;
  return (
    current.querySelector<HTMLElement>(`.jp-Cell.jp-mod-active .${OUTPUT_CLASS}`) ??
    current.querySelector<HTMLElement>(`.${OUTPUT_CLASS}`)
  );
}

/** What this file reads of a code cell's output area (structural, to import no more packages). */
interface OutputAreaLike {
  model: { length: number; get(index: number): IRenderMime.IMimeModel };
  widgets: readonly Widget[];
}

/**
 * A trusted notebook reopened: JupyterLab prefers the widget view of an explorer widget's saved
 * output, which cannot load without the kernel that made it ("Loading widget..." for good). That
 * output also carries the saved document, so the read-only explorer is shown in its place until
 * the widget view renders something (widget state saved in the notebook can restore it).
 */
export async function showSavedWidgetOutputs(panel: NotebookPanel): Promise<void> {
  await panel.context.ready;
  if (panel.isDisposed) return;
  for (const cell of panel.content.widgets) {
    const area = (cell as unknown as { outputArea?: OutputAreaLike }).outputArea;
    for (let i = 0; area && i < area.model.length; i++) {
      const output = area.model.get(i);
      const child = area.widgets[i];
      if (!(WIDGET_VIEW in output.data) || !(MIME_TYPE in output.data)) continue;
      if (!(child instanceof Panel) || child.widgets.length < 2) continue;
      const view = child.widgets[child.widgets.length - 1] as Widget;
      if (view.hasClass(OUTPUT_CLASS)) continue; // already the explorer (an untrusted notebook)
      const explorer = new ExplorerRenderer(MIME_TYPE);
      explorer.addClass("jp-OutputArea-output");
      void explorer.renderModel(output);
      view.hide();
      child.addWidget(explorer);
      const watch = new MutationObserver(() => {
        if (!view.node.firstElementChild) return; // still only "Loading widget..." text
        watch.disconnect();
        explorer.dispose();
        view.show();
      });
      watch.observe(view.node, { childList: true });
      view.disposed.connect(() => watch.disconnect());
    }
  }
}

let tabs = 0;

export const commandsPlugin: JupyterFrontEndPlugin<void> = {
  id: "thunder-explorer:commands",
  description: "Opens a thunder trace explorer output in its own tab.",
  autoStart: true,
  optional: [ICommandPalette, INotebookTracker],
  activate(
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    notebooks: INotebookTracker | null,
  ) {
    app.commands.addCommand(OPEN_IN_TAB, {
      label: "Open Trace Explorer in New Tab",
      caption: "Show a thunder trace explorer output in its own, larger, main-area tab",
      isEnabled: (args) => targetOutput(app, args.fromContextMenu === true) !== null,
      execute: (args) => {
        const output = targetOutput(app, args.fromContextMenu === true);
        if (!output) return null;
        const live = (output as unknown as Record<string, unknown>)[HOST_PROPERTY];
        const host = live
          ? (live as ExplorerHost)
          : shown.has(output)
            ? staticHost(shown.get(output), SAVED_STATUS)
            : null;
        if (!host) return null;
        const widget = explorerTab(host, `thunder-explorer-tab-${++tabs}`);
        app.shell.add(widget, "main");
        app.shell.activateById(widget.id);
        return widget.id;
      },
    });
    app.contextMenu.addItem({
      command: OPEN_IN_TAB,
      selector: `.${OUTPUT_CLASS}`,
      rank: 0,
      args: { fromContextMenu: true },
    });
    palette?.addItem({ command: OPEN_IN_TAB, category: "Thunder" });
    notebooks?.widgetAdded.connect((_, panel) => void showSavedWidgetOutputs(panel));
  },
};
