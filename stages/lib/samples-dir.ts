import { fileURLToPath } from 'node:url';

/**
 * The repository's `stages/samples`. Resolved from this module's own location so that it does
 * not depend on the working directory; compiled, this file is `dist/stages/lib/samples-dir.js`,
 * while the samples are not compiled and stay in `stages/samples`.
 */
export const BUNDLED_SAMPLES_DIR = fileURLToPath(new URL('../../../stages/samples/', import.meta.url));
