import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { mount } from "../src/explorer";
import { staticHost, type ExplorerHost } from "../src/host";
import type { TraceDocument } from "../src/schema";

const here = dirname(fileURLToPath(import.meta.url));

/** A fresh copy of a fixture document (tests may mutate it). */
export function fixture(
  name: "sample" | "sample-error" | "real-mlp" | "backward-gelu" | "fsdp-zero3",
): TraceDocument {
  return JSON.parse(readFileSync(join(here, "fixtures", `${name}.json`), "utf8")) as TraceDocument;
}

export interface Mounted {
  el: HTMLElement;
  root: HTMLElement;
  cleanup: () => void;
  q<T extends Element = Element>(selector: string): T;
  all(selector: string): Element[];
}

/** Mounts the explorer into a fresh element. */
export function mountDoc(doc: unknown, host?: ExplorerHost): Mounted {
  const el = document.createElement("div");
  document.body.appendChild(el);
  const cleanup = mount(el, host ?? staticHost(doc));
  const root = el.querySelector(".thunder-explorer") as HTMLElement;
  return {
    el,
    root,
    cleanup: () => {
      cleanup();
      el.remove();
    },
    q<T extends Element = Element>(selector: string): T {
      const found = el.querySelector(selector);
      if (!found) throw new Error(`nothing matches ${selector}`);
      return found as T;
    },
    all: (selector) => Array.from(el.querySelectorAll(selector)),
  };
}

export function click(target: Element): void {
  target.dispatchEvent(new MouseEvent("click", { bubbles: true }));
}

export function key(target: Element, k: string): void {
  target.dispatchEvent(new KeyboardEvent("keydown", { key: k, bubbles: true }));
}
