/**
 * The names drain flags were read under before src/flags/: kept for src/runner/tenant-pool.ts.
 * @deprecated use FlagReader, FlagChannel (or BrokerFlags) and ListedFlags from src/flags/.
 */
export type { FlagReader as DrainMarkers } from '../flags/flag-reader.js';
export { FlagChannel as ProbedDrainMarkers } from '../flags/flag-channel.js';
export { ListedFlags as ListedDrainMarkers } from '../flags/listed-flags.js';
