/** Writes docs/configuration.md from the settings table (`npm run docs`). */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { configurationMarkdown } from "../src/config/docs.ts";

const path = join(import.meta.dir, "..", "docs", "configuration.md");
writeFileSync(path, configurationMarkdown());
console.log(`wrote ${path}`);
