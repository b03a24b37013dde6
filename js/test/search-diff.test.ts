import { afterEach, describe, expect, test } from "vitest";
import type { TraceDocument } from "../src/schema";
import { click, fixture, key, mountDoc, type Mounted } from "./helpers";

let m: Mounted | null = null;
afterEach(() => {
  m?.cleanup();
  m = null;
});

function openStep(mm: Mounted, index: number): void {
  click(mm.q(`[data-testid='step'][data-step-index='${index}']`));
}

/** Types into the search box as a person does (focused, one input event). */
function search(mm: Mounted, text: string): void {
  const box = mm.q<HTMLInputElement>("input[data-testid='search']");
  box.focus();
  box.value = text;
  box.dispatchEvent(new Event("input", { bubbles: true }));
}

function marked(mm: Mounted): (string | null)[] {
  return mm.all("[data-testid='node'].search-match").map((n) => n.getAttribute("data-node-id"));
}

function selected(mm: Mounted): string | null {
  return (
    mm.all("[data-testid='node'][aria-selected='true']")[0]?.getAttribute("data-node-id") ?? null
  );
}

/** The sample with value t2 renamed t10 and a parameter path on y (step 1). */
function renamed(): TraceDocument {
  const doc = fixture("sample");
  for (const n of doc.steps[1]!.nodes) {
    for (const v of [...n.inputs, ...n.outputs]) {
      if (v.name === "t2") v.name = "t10";
      if (v.name === "y") v.path = "block.norm.scale";
    }
  }
  return doc;
}

describe("search", () => {
  test("matches any part of a name by default, whole words as an option", () => {
    m = mountDoc(renamed());
    openStep(m, 1);
    search(m, "t1");
    expect(marked(m)).toEqual(["n2", "n3", "n4"]); // t1's and t10's producers and consumers
    const whole = m.q<HTMLElement>("[data-testid='search-whole-word']");
    click(whole);
    expect(whole.getAttribute("aria-pressed")).toBe("true");
    expect(marked(m)).toEqual(["n2", "n3"]); // t1's only, not t10's
    search(m, "t10");
    expect(marked(m)).toEqual(["n3", "n4"]);
    search(m, "t");
    expect(marked(m)).toEqual([]);
    expect(m.q("[data-testid='search-count']").textContent).toBe("0 matches");
    search(m, "ad");
    expect(marked(m)).toEqual([]);
    click(whole);
    expect(marked(m)).toEqual(["n3"]); // "ad" is part of "add"
  });

  test("matches op names, module paths and parameter paths, in any case", () => {
    m = mountDoc(renamed());
    openStep(m, 1);
    const hits = (q: string): (string | null)[] => (search(m!, q), marked(m!));
    expect(hits("add")).toEqual(["n3"]);
    expect(hits("LTORCH.ADD")).toEqual(["n3"]);
    expect(hits("block.mlp")).toEqual(["n1", "n2", "n3", "n6"]);
    expect(hits("block.")).toEqual(["n1", "n2", "n3", "n6", "n4"]); // a path being typed
    expect(hits("mlp")).toEqual(["n1", "n2", "n3", "n6"]);
    expect(hits("block")).toEqual(["n1", "n2", "n3", "n6", "n4"]);
    expect(hits("LOCK")).toEqual(["n1", "n2", "n3", "n6", "n4"]);
    expect(hits("norm.scale")).toEqual(["n1", "n4"]); // the nodes reading y, by its path
  });

  test("a module group's label matches the nodes inside it", () => {
    const doc = fixture("sample");
    for (const n of doc.steps[1]!.nodes) if (n.source) n.source.module_path = null;
    m = mountDoc(doc);
    openStep(m, 1);
    search(m, "block.mlp");
    expect(marked(m)).toEqual(["n1", "n2", "n3", "n6"]);
  });

  test("lists the matches under the box and selects the first as you type", () => {
    m = mountDoc(fixture("sample"));
    openStep(m, 1);
    search(m, "t1");
    const list = m.q<HTMLElement>("[data-testid='search-results']");
    expect(list.hidden).toBe(false);
    const entries = m.all("[data-testid='search-result']");
    expect(entries.map((e) => e.textContent)).toEqual(["sin → t1 block.mlp", "add → t2 block.mlp"]);
    expect(entries[0]!.getAttribute("aria-selected")).toBe("true");
    expect(selected(m)).toBe("n2");
    expect(m.q("[data-testid='source-line'][aria-current='true']").textContent).toContain(
      "ltorch.sin",
    );
    click(entries[1]!);
    expect(selected(m)).toBe("n3");
    expect(m.q("[data-testid='search-result'][aria-selected='true']").textContent).toContain("add");
    m.q<HTMLInputElement>("input[data-testid='search']").blur();
    expect(list.hidden).toBe(true);
    search(m, "zzz");
    expect(m.q("[data-testid='search-results']").textContent).toContain("no op, value or module");
    expect(selected(m)).toBe("n3"); // nothing found: the selection stays
  });

  test("Enter and Shift+Enter cycle from the first match", () => {
    m = mountDoc(fixture("sample"));
    openStep(m, 1);
    search(m, "x");
    const box = m.q<HTMLInputElement>("input[data-testid='search']");
    expect(marked(m)).toEqual(["n1", "n2", "n6"]);
    expect(selected(m)).toBe("n1");
    key(box, "Enter");
    expect(selected(m)).toBe("n2");
    box.dispatchEvent(
      new KeyboardEvent("keydown", { key: "Enter", shiftKey: true, bubbles: true }),
    );
    box.dispatchEvent(
      new KeyboardEvent("keydown", { key: "Enter", shiftKey: true, bubbles: true }),
    );
    expect(selected(m)).toBe("n6");
  });

  test("typing leaves a collapsed fusion shut; Enter opens it", () => {
    m = mountDoc(fixture("sample"));
    openStep(m, 3);
    const toggle = (): Element =>
      m!.q("[data-testid='group'][data-group-id='g2'] [data-testid='group-toggle']");
    search(m, "sin");
    expect(toggle().getAttribute("aria-expanded")).toBe("false");
    expect(m.q("[data-testid='node-details']").textContent).toContain("torch.sin");
    key(m.q("input[data-testid='search']"), "Enter");
    expect(toggle().getAttribute("aria-expanded")).toBe("true");
    expect(selected(m)).toBe("n2");
  });

  test("moving to another step keeps the selection and re-marks the matches", () => {
    m = mountDoc(fixture("sample"));
    openStep(m, 1);
    search(m, "cos");
    expect(selected(m)).toBe("n6");
    click(m.q("[data-node-id='n4']"));
    openStep(m, 2);
    expect(selected(m)).toBe("n4");
    expect(marked(m)).toEqual([]); // cos is dead code there
    expect(m.q("[data-testid='search-count']").textContent).toBe("0 matches");
  });

  test("stays quick on a 2,000-node step", () => {
    const doc = fixture("sample");
    const step = doc.steps[1]!;
    const proto = step.nodes[2]!; // t2 = add(t0, t1)
    step.nodes = Array.from({ length: 2000 }, (_, i) => ({
      ...proto,
      id: `n${100 + i}`,
      uid: 100 + i,
      line: null,
      group: null,
      inputs: [{ ...proto.inputs[0]!, name: i ? `t${i - 1}` : "x" }],
      outputs: [{ ...proto.outputs[0]!, name: `t${i}` }],
    }));
    step.edges = step.nodes.slice(1).map((n, i) => ({
      id: `e${i}`,
      source: `n${100 + i}`,
      target: n.id,
      value: `t${i}`,
      shape: null,
      dtype: null,
    }));
    step.groups = [];
    m = mountDoc(doc);
    openStep(m, 1);
    const started = performance.now();
    for (const q of ["t", "t1", "t18", "t180", "t1800"]) search(m, q);
    const elapsed = performance.now() - started;
    expect(marked(m).length).toBeLessThanOrEqual(2);
    expect(m.q("[data-testid='search-count']").textContent).toBe("2 matches");
    expect(elapsed).toBeLessThan(1000); // jsdom: generous; a browser takes a few ms a keystroke
  });
});

describe("diff lists", () => {
  test("the lists open on demand, over the graph, and stay open from step to step", () => {
    const mm = mountDoc(fixture("sample"));
    m = mm;
    openStep(mm, 2);
    const toggle = (): Element => mm.q("[data-testid='diff-toggle']");
    const open = (): boolean => mm.q("[data-testid='diff-summary']").classList.contains("open");
    expect(open()).toBe(false);
    expect(toggle().getAttribute("aria-expanded")).toBe("false");
    click(toggle());
    expect(open()).toBe(true);
    expect(toggle().getAttribute("aria-expanded")).toBe("true");
    openStep(mm, 3);
    expect(open()).toBe(true);
    click(toggle());
    openStep(mm, 2);
    expect(open()).toBe(false);
  });

  test("a step with nothing to list has no toggle", () => {
    m = mountDoc(fixture("sample"));
    openStep(m, 0);
    expect(m.all("[data-testid='diff-toggle']")).toHaveLength(0);
  });

  test("removed nodes are listed by op and value; a click selects them in the previous step", () => {
    m = mountDoc(fixture("sample"));
    openStep(m, 2);
    const removed = m.q("[data-testid='diff-removed']");
    expect(removed.textContent).toBe("removed (1)cos → t4");
    click(removed.querySelector("[data-testid='diff-link']")!);
    expect(m.q("[data-testid='step'][aria-selected='true']").getAttribute("data-step-index")).toBe(
      "1",
    );
    expect(selected(m)).toBe("n6");
  });

  test("fused nodes name their fusion; a click selects the fusion node", () => {
    m = mountDoc(fixture("sample"));
    openStep(m, 3);
    const fused = m.all("[data-testid='diff-fused'] li").map((li) => li.textContent);
    expect(fused).toEqual([
      "mul → t0 fused into TorchCompile0",
      "sin → t1 fused into TorchCompile0",
      "add → t2 fused into TorchCompile0",
    ]);
    click(m.q("[data-testid='diff-fused'] [data-testid='diff-link']"));
    expect(selected(m)).toBe("n7");
    expect(m.q("[data-testid='step'][aria-selected='true']").getAttribute("data-step-index")).toBe(
      "3",
    );
  });

  test("merged nodes name the value that replaced them; added nodes are listed", () => {
    const doc = fixture("sample");
    const diff = doc.steps[2]!.diff!;
    diff.removed = ["n6", "n1"];
    diff.merged = { n6: "n2", n1: "input:x" };
    diff.added = ["n5"];
    m = mountDoc(doc);
    openStep(m, 2);
    expect(m.all("[data-testid='diff-removed'] li").map((li) => li.textContent)).toEqual([
      "cos → t4 merged into t1",
      "mul → t0 merged into x",
    ]);
    expect(m.q("[data-testid='diff-added']").textContent).toBe("added (1)return");
    const summary = m.q("[data-testid='diff-summary']").textContent ?? "";
    expect(summary).not.toMatch(/\bn\d+\b/); // values, never node ids
    const kept = m
      .all("[data-testid='diff-removed'] [data-testid='diff-link']")
      .find((b) => b.textContent === "t1")!;
    click(kept);
    expect(m.q("[data-testid='step'][aria-selected='true']").getAttribute("data-step-index")).toBe(
      "2",
    );
    expect(selected(m)).toBe("n2");
  });
});
