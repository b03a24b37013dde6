import { afterEach, describe, expect, test } from "vitest";
import type { Step, TraceDocument } from "../src/schema";
import { click, fixture, mountDoc, type Mounted } from "./helpers";

let m: Mounted | null = null;
afterEach(() => {
  m?.cleanup();
  m = null;
});

/** The sample's steps as cache entry `entry`'s, its function renamed `name` in each source. */
function entrySteps(doc: TraceDocument, entry: number, name: string): Step[] {
  return doc.steps.map((s) => ({
    ...s,
    id: `e${entry}${s.id}`,
    entry,
    source: s.source.replace("def computation(", `def ${name}(`),
    diff: s.diff ? { ...s.diff, previous: `e${entry}${s.diff.previous}` } : null,
  }));
}

/** What generate() leaves: a prefill entry and a decoding entry (the last compiled, shown first). */
function generation(): TraceDocument {
  const doc = fixture("sample");
  const item = (label: string, hits: number, ms: number) => ({
    label,
    inputs: `${label} (inputs)`,
    symbolic: label.startsWith("decode"),
    hits,
    compile_ms: ms,
    steps: true,
  });
  return {
    ...doc,
    steps: [...entrySteps(doc, 0, "prefill"), ...entrySteps(doc, 1, "decode")],
    entries: {
      items: [
        item("prefill: input_ids i64[1, 8]", 0, 812),
        item("decode: input_ids i64[1, 1], cache length symbolic", 4, 250),
      ],
      shown: 1,
    },
  };
}

const sourceText = (mm: Mounted): string =>
  mm
    .all("[data-testid='source-line']")
    .map((l) => l.textContent)
    .join("\n");
const selectedStep = (mm: Mounted): string | null =>
  mm.q("[data-testid='step'][aria-selected='true']").getAttribute("data-step-index");

describe("the cache entry picker", () => {
  test("opens on the last compiled entry, and a click shows another entry's steps, on the same pass", () => {
    m = mountDoc(generation());
    const buttons = m.all("[data-testid='entry']");
    const text = (i: number): string => buttons[i]!.textContent!.replace(/\u00a0/g, " "); // (a shape never wraps)
    expect(buttons.map((b) => b.getAttribute("aria-pressed"))).toEqual(["false", "true"]);
    expect(text(0)).toContain("prefill: input_ids i64[1, 8]");
    expect(text(0)).toContain("0 cache hits · compiled in 812 ms");
    expect(text(1)).toContain("4 cache hits · compiled in 250 ms · last compiled");
    expect(m.root.getAttribute("data-entry")).toBe("1");
    expect(m.all("[data-testid='step']")).toHaveLength(4); // one entry's steps, not both
    click(m.q("[data-testid='step'][data-step-index='3']"));
    expect(sourceText(m)).toContain("def decode(");
    click(m.q("[data-testid='node'][data-node-id='n7']"));
    click(m.q("[data-testid='entry'][data-entry='0']"));
    expect(m.root.getAttribute("data-entry")).toBe("0");
    expect(m.all("[data-testid='step']")).toHaveLength(4);
    expect(selectedStep(m)).toBe("3"); // the same pass of the other entry
    expect(sourceText(m)).toContain("def prefill(");
    expect(sourceText(m)).not.toContain("def decode(");
    expect(m.all("[data-testid='node'][aria-selected='true']")).toHaveLength(0); // ids are per entry
    expect(m.all("[data-testid='entry']").map((b) => b.getAttribute("aria-pressed"))).toEqual([
      "true",
      "false",
    ]);
  });

  test("a profile of the last compiled entry is not shown on another entry", () => {
    const doc = generation();
    const profile = {
      calls: 3,
      device: "cpu",
      call_ms: 1,
      eager_call_ms: 1,
      call_cpu_ms: null,
      eager_call_cpu_ms: null,
      measured: "",
      unsteady: false,
      uncompiled: {},
      backward: false,
      attributed_ms: 1,
      steps: { e1s3: { total_ms: 1, nodes: { n7: { ms: 0.75, bytes: 128 } } } },
      modules: [],
      saved: null,
    };
    m = mountDoc({ ...doc, profile });
    expect(m.all("[data-testid='profile']").length).toBeGreaterThan(0);
    click(m.q("[data-testid='entry'][data-entry='0']"));
    expect(m.all("[data-testid='profile']")).toHaveLength(0);
  });

  test("a document written before the picker lists its entries and shows the steps it has", () => {
    const doc = fixture("sample");
    const entries = {
      inputs: ["input_ids: cpu i64[1, 8]", "input_ids: cpu i64[1, 1], keys: cpu f32[1, 4, 8, 16]"],
      shown: 1,
    };
    m = mountDoc({ ...doc, entries });
    expect(m.all("[data-testid='entry']")).toHaveLength(1);
    expect(m.q("[data-testid='entry']").textContent).toContain(
      "entry 2: input_ids: cpu i64[1,\u00a01]",
    );
    expect(m.q("[data-testid='entry-picker']").textContent).toContain(
      "1 more entry (steps not kept)",
    );
    expect(m.all("[data-testid='step']")).toHaveLength(4);
    m.cleanup();
    m = mountDoc({ ...doc, entries: { items: "not a list", shown: 0 } });
    expect(m.root.textContent).toContain("entries.items");
  });

  test("one entry: no picker", () => {
    m = mountDoc(fixture("sample"));
    expect(m.all("[data-testid='entry-picker']")).toHaveLength(0);
    expect(m.root.hasAttribute("data-entry")).toBe(false);
  });
});
