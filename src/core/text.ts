/**
 * @module core/text
 * The rule of free-text fields (names, audiences, descriptions): `min` to `max` characters and no
 * control characters (C0, DEL). Characters are Unicode code points (an emoji is one), as JSON
 * Schema counts them; `String.length` would count UTF-16 units. The request schemas
 * (schemas/common.ts Chars) and the checks outside them (the CLI, project settings) share it.
 */

/** The expression a text of `min` to `max` characters matches (with the `u` flag). */
export const plainTextPattern = (min: number, max: number): RegExp => new RegExp(`^[^\\u0000-\\u001f\\u007f]{${min},${max}}$`, "u");

/**
 * The expression a text matches, as sent, when it is trimmed first (`String.prototype.trim`, the
 * white space and line ends `\s` matches) and must then be 1 to `max` characters without control
 * characters: what the OpenAPI document shows for a trimmed field (schemas/common.ts Text).
 */
export function trimmedTextPattern(max: number): RegExp {
  const inner = "[^\\u0000-\\u001f\\u007f]";
  const edge = "[^\\u0000-\\u001f\\u007f\\s]";
  return new RegExp(`^\\s*(?:${edge}|${edge}${inner}{0,${max - 2}}${edge})\\s*$`, "u");
}

const patterns = new Map<string, RegExp>();

/** Whether `value` is a text of `min` to `max` code points without control characters. */
export function isPlainText(value: string, min: number, max: number): boolean {
  const key = `${min},${max}`;
  let pattern = patterns.get(key);
  if (pattern === undefined) patterns.set(key, (pattern = plainTextPattern(min, max)));
  return pattern.test(value);
}
