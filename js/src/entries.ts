/**
 * Several cache entries (`generate`: a prefill entry, then a decoding entry whose cache length is
 * symbolic): the document holds the steps of each (Note [Steps of each cache entry] in
 * thunder_viz/session.py) and the explorer shows one entry at a time, as a document of its own
 * (`entryView`), chosen in the picker above the steps (`entryPicker`).
 *
 * Layer: front-end core; imports dom and the schema's types.
 */
import { counted, formatMs, h } from "./dom";
import type { CacheEntries, CacheEntry, TraceDocument } from "./schema";

/** The entry a step is of: its `entry`, else the one the document opens on (documents written before the picker). */
function entryOf(step: { entry?: number }, entries: CacheEntries): number | null {
  return step.entry ?? entries.shown;
}

/** Whether the picker can show `entry` (the document carries its steps). */
export function canShow(model: TraceDocument, entry: number): boolean {
  const entries = model.entries;
  if (!entries) return false;
  return model.steps.some((s) => entryOf(s, entries) === entry);
}

/**
 * The document as the explorer shows it for one entry: that entry's steps only. What the document
 * says of the last compilation alone (its profile, why torch's autograd records its backward)
 * stays with the entry whose steps it names, so nothing shown is another entry's.
 */
export function entryView(model: TraceDocument, entry: number | null): TraceDocument {
  const entries = model.entries;
  if (!entries || entry === null) return model;
  const steps = model.steps.filter((s) => entryOf(s, entries) === entry);
  const profile = model.profile;
  const profiled = profile !== null && steps.some((s) => s.id in profile.steps);
  return {
    ...model,
    steps,
    profile: profiled ? profile : null,
    autograd: entry === entries.shown ? model.autograd : null,
  };
}

/** `label` with a shape kept on one line (`i64[1, 8]` never wraps after its comma). */
function unbroken(label: string): string {
  return label.replace(/\[[^\]]*\]/g, (shape) => shape.replace(/ /g, "\u00a0"));
}

/** `4 cache hits · compiled in 214 ms`: what a user weighs entries by. */
export function entryStats(item: CacheEntry): string {
  const parts: string[] = [];
  if (item.hits !== null) parts.push(counted(item.hits, "cache hit"));
  if (item.compile_ms !== null) parts.push(`compiled in ${formatMs(item.compile_ms)}`);
  return parts.join(" · ");
}

/**
 * The picker: one button per entry whose steps the document carries (the one shown pressed), each
 * with its label and counts; the entries it lists without steps are named in a note. `onPick` is
 * called with the index of the entry clicked.
 */
export function entryPicker(
  doc: Document,
  model: TraceDocument,
  shown: number | null,
  onPick: (entry: number) => void,
): HTMLElement | null {
  const entries = model.entries;
  if (!entries) return null;
  const last = entries.shown;
  const buttons: HTMLElement[] = [];
  const without: string[] = [];
  entries.items.forEach((item, i) => {
    if (!canShow(model, i)) {
      without.push(item.label);
      return;
    }
    const title = [
      `cache entry ${i + 1} of ${entries.items.length}${i === last ? " (the last compiled)" : ""}`,
      item.inputs,
      entryStats(item),
    ]
      .filter(Boolean)
      .join("\n");
    const button = h(
      doc,
      "button",
      {
        type: "button",
        class: "tx-entry",
        "data-testid": "entry",
        "data-entry": i,
        "aria-pressed": String(i === shown),
        title,
      },
      h(doc, "span", { class: "tx-entry-label" }, unbroken(item.label)),
      h(
        doc,
        "span",
        { class: "tx-entry-meta" },
        [entryStats(item), i === last ? "last compiled" : ""].filter(Boolean).join(" · "),
      ),
    );
    button.addEventListener("click", () => onPick(i));
    buttons.push(button);
  });
  const note = without.length
    ? h(
        doc,
        "div",
        { class: "tx-entry-more", title: without.join("\n") },
        `${without.length} more ${without.length === 1 ? "entry" : "entries"} (steps not kept)`,
      )
    : null;
  return h(
    doc,
    "div",
    {
      class: "tx-entries",
      role: "group",
      "aria-label": "cache entries",
      "data-testid": "entry-picker",
    },
    h(doc, "h5", {}, `Cache entries (${entries.items.length})`),
    ...buttons,
    ...(note ? [note] : []),
  );
}
