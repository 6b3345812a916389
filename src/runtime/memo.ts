/**
 * @module runtime/memo
 * Results of a pure function of a request's text (its host, mostly), kept for the next request:
 * the same few hosts come with every request.
 */

/**
 * `compute` remembered per key, `max` keys at most: the memo is emptied when full, so keys a
 * client makes up (a flood of Host headers) cost the work they would cost without it, and no
 * memory beyond `max` entries.
 */
export function boundedMemo<K, V>(compute: (key: K) => V, max = 256): (key: K) => V {
  const memo = new Map<K, V>();
  return (key) => {
    let value = memo.get(key);
    if (value === undefined && !memo.has(key)) {
      value = compute(key);
      if (memo.size >= max) memo.clear();
      memo.set(key, value);
    }
    return value as V;
  };
}
