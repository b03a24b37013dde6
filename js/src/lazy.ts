/**
 * Fields computed on first use, for the steps of a document (Note [Lazy steps] in schema.ts).
 *
 * Layer: front-end core, pure; imports nothing.
 */

/**
 * Gives `head` the `fields`, as getters that call `load` once, on the first read of any of them,
 * and then become plain properties holding what it returned. `head` keeps its identity, so code
 * that compares steps by reference sees no difference. When `load` throws, the fields stay
 * unread and the next read throws again.
 */
export function withLazyFields<T extends object>(
  head: T,
  fields: readonly string[],
  load: () => Record<string, unknown>,
): T {
  const fill = (): void => {
    const loaded = load();
    for (const f of fields) {
      Object.defineProperty(head, f, {
        value: loaded[f],
        writable: true,
        enumerable: true,
        configurable: true,
      });
    }
  };
  for (const f of fields) {
    Object.defineProperty(head, f, {
      get(): unknown {
        fill();
        return (head as Record<string, unknown>)[f];
      },
      enumerable: true,
      configurable: true,
    });
  }
  return head;
}

/** Whether `obj.field` holds its value already (a read costs nothing). */
export function isLoaded(obj: object, field: string): boolean {
  return Object.getOwnPropertyDescriptor(obj, field)?.get === undefined;
}
