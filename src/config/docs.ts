/**
 * @module config/docs
 * Renders the settings table as Markdown: the body of docs/configuration.md, which
 * scripts/gen-docs.ts writes and a test compares.
 */
import { SETTINGS } from "./schema.ts";

export function configurationMarkdown(): string {
  const rows = SETTINGS.map((s) => `| \`${s.env}\` | ${s.flag ? `\`${s.flag}\`` : "—"} | ${s.defaultText} | ${s.description} |`);
  return [
    "# Configuration",
    "",
    "<!-- Generated from src/config/schema.ts by `npm run docs`; a test fails when they differ. -->",
    "",
    "Every setting is an environment variable; some also have a flag, which wins over the variable.",
    "All settings are validated at start-up and every problem is reported at once; the process exits",
    "with status 1 and changes nothing.",
    "",
    "| variable | flag | default | meaning |",
    "|---|---|---|---|",
    ...rows,
    "",
  ].join("\n");
}
