import { afterEach, describe, expect, test } from "vitest";
import { click, fixture, mountDoc, type Mounted } from "./helpers";
import type { TraceDocument } from "../src/schema";

const SCRIPT = "<script>alert(1)</script>";
const IMG = '<img src=x onerror="alert(2)">';
const PAYLOAD = `${SCRIPT}${IMG}`;

/** The sample with every user-controlled string the explorer shows replaced by markup. */
function hostileDocument(): TraceDocument {
  const doc = fixture("sample");
  doc.title = PAYLOAD;
  for (const step of doc.steps) {
    step.pass = PAYLOAD;
    step.source = step.source
      .split("\n")
      .map((l) => `${l} ${PAYLOAD}`)
      .join("\n");
    for (const node of step.nodes) {
      node.op = `${SCRIPT}op`;
      node.label = `${IMG}label`;
      node.decomposition = node.decomposition.map(() => PAYLOAD);
      for (const v of [...node.inputs, ...node.outputs]) v.name = `${IMG}${v.name}`;
      if (node.source) {
        node.source.file = `/tmp/${SCRIPT}.py`;
        node.source.code = `x = "${IMG}"`;
        node.source.function = SCRIPT;
        node.source.module_path = IMG;
      }
    }
    for (const g of step.groups) g.label = PAYLOAD;
  }
  for (const r of doc.runs) r.executors = [...r.executors, PAYLOAD];
  doc.executors!.available.push(PAYLOAD);
  doc.error = {
    type: SCRIPT,
    message: IMG,
    stage: "running",
    user_frame: { file: IMG, line: 3, function: SCRIPT, code: `s = "${SCRIPT}"` },
  };
  return doc;
}

function tagHistogram(root: Element): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const el of Array.from(root.querySelectorAll("*"))) {
    const tag = el.tagName.toLowerCase();
    counts[tag] = (counts[tag] ?? 0) + 1;
  }
  return counts;
}

function walk(m: Mounted, visit: () => void): void {
  for (const step of m.all("[data-testid='step'][data-step-index]")) {
    click(step);
    const first = m.all("[data-testid='node']")[0];
    if (first) click(first);
    visit();
  }
}

let mounted: Mounted[] = [];
afterEach(() => {
  mounted.forEach((m) => m.cleanup());
  mounted = [];
});

describe("document strings are text, never markup", () => {
  test("no script, img or event-handler attribute is created", () => {
    const m = mountDoc(hostileDocument());
    mounted.push(m);
    walk(m, () => {
      expect(
        m.el.querySelectorAll("script, img, iframe, object, embed, a, foreignObject, style"),
      ).toHaveLength(0);
      for (const el of Array.from(m.el.querySelectorAll("*"))) {
        for (const attr of Array.from(el.attributes)) {
          expect(attr.name.startsWith("on"), `${el.tagName} has ${attr.name}`).toBe(false);
          expect(["href", "src", "style", "xlink:href"]).not.toContain(attr.name);
        }
      }
    });
  });

  test("hostile strings make exactly the elements harmless ones make", () => {
    const benign = mountDoc(fixture("sample"));
    const hostile = mountDoc(hostileDocument());
    mounted.push(benign, hostile);
    for (const i of [0, 1, 2, 3]) {
      for (const m of [benign, hostile]) {
        click(m.q(`[data-testid='step'][data-step-index='${i}']`));
        click(m.all("[data-testid='node']")[0]!);
      }
      const b = tagHistogram(benign.el);
      const h = tagHistogram(hostile.el);
      // the hostile document adds one executor toggle (label, input, span), an error box
      // (div ×5, strong, span, code) and a "failed" step (li, span ×2); everything else must
      // match tag for tag.
      const extra: Record<string, number> = {
        label: 1,
        input: 1,
        span: 4,
        li: 1,
        div: 5,
        strong: 1,
        code: 1,
      };
      // <wbr> marks where names may wrap (after "." and "_"): how many depends on the text
      for (const tag of new Set(
        [...Object.keys(b), ...Object.keys(h)].filter((t) => t !== "wbr"),
      )) {
        expect((h[tag] ?? 0) - (b[tag] ?? 0), `<${tag}> in step ${i}`).toBe(extra[tag] ?? 0);
      }
    }
  });

  test("the hostile strings are shown literally", () => {
    const m = mountDoc(hostileDocument());
    mounted.push(m);
    click(m.q("[data-testid='step'][data-step-index='1']"));
    click(m.all("[data-testid='node']")[0]!);
    const text = m.el.textContent ?? "";
    expect(text).toContain(SCRIPT);
    expect(text).toContain(IMG);
    expect(m.q(".tx-title").textContent).toBe(PAYLOAD);
    expect(m.q("[data-testid='source-line'][data-line='1']").textContent).toContain(PAYLOAD);
    const details = m.q("[data-testid='node-details']").textContent ?? "";
    expect(details).toContain(`${SCRIPT}op`);
    expect(details).toContain(`/tmp/${SCRIPT}.py`);
    expect(m.q("[data-testid='error']").textContent).toContain(IMG);
    expect(m.q("[data-testid='node'] .node-label").textContent).toContain("<img src=x");
  });
});
