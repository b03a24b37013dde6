/**
 * JupyterLab entry: the explorer in notebook outputs (saved or live) with no kernel, and a command
 * that opens an output's explorer in its own main-area tab.
 *
 * Layer: front-end entry; imports the core (explorer, host, schema) and JupyterLab's shared
 * packages (provided by JupyterLab at run time, never bundled). Two thin exports over one module:
 * `rendererExtension` (a mime renderer extension for `application/vnd.thunder.trace+json`) and
 * `commandsPlugin` (a front-end plugin for the command, the palette and the context menu).
 * build.mjs bundles this file into `lib/plugin.js`, which `lib/mime.js` and `lib/extension.js`
 * re-export for JupyterLab's federated build. The document in an output is untrusted data (a
 * notebook can hold anything): it is only ever handed to the core, which validates it and renders
 * its strings as text; the renderer is therefore `safe` and also shows untrusted notebooks.
 */
import type { JupyterFrontEnd, JupyterFrontEndPlugin } from "@jupyterlab/application";
import { ICommandPalette } from "@jupyterlab/apputils";
import type { IRenderMime } from "@jupyterlab/rendermime-interfaces";
import type { Message } from "@lumino/messaging";
import { Widget } from "@lumino/widgets";
import { mount } from "./explorer";
import { staticHost } from "./host";
import { MIME_TYPE } from "./schema";

/** The class of every output rendered by this extension (the context menu's selector). */
export const OUTPUT_CLASS = "thunder-explorer-output";
export const TAB_CLASS = "thunder-explorer-tab";
export const OPEN_IN_TAB = "thunder-explorer:open-in-tab";
/** What the status line says: the output is shown from the notebook, nothing can rerun. */
export const SAVED_STATUS = "saved output";
const TITLE_CHARS = 60;

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
    const data: unknown = model.data[this.mimeType];
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

/** A main-area widget showing `doc` in the explorer, filling the tab. */
export function explorerTab(doc: unknown, id: string): Widget {
  const widget = new ExplorerTab();
  widget.id = id;
  widget.node.tabIndex = -1;
  widget.addClass(TAB_CLASS);
  widget.title.label = tabTitle(doc);
  widget.title.caption = "thunder trace explorer (read-only)";
  widget.title.closable = true;
  const unmount = mount(widget.node, staticHost(doc, SAVED_STATUS));
  widget.disposed.connect(() => unmount());
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

let tabs = 0;

export const commandsPlugin: JupyterFrontEndPlugin<void> = {
  id: "thunder-explorer:commands",
  description: "Opens a thunder trace explorer output in its own tab.",
  autoStart: true,
  optional: [ICommandPalette],
  activate(app: JupyterFrontEnd, palette: ICommandPalette | null) {
    app.commands.addCommand(OPEN_IN_TAB, {
      label: "Open Trace Explorer in New Tab",
      caption: "Show a thunder trace explorer output in its own, larger, main-area tab",
      isEnabled: (args) => targetOutput(app, args.fromContextMenu === true) !== null,
      execute: (args) => {
        const output = targetOutput(app, args.fromContextMenu === true);
        if (!output || !shown.has(output)) return null;
        const widget = explorerTab(shown.get(output), `thunder-explorer-tab-${++tabs}`);
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
  },
};
