/**
 * Loaded into each `cohort worker` of the `scale` part with `node --import`: counts its Redis
 * commands and answers SIGUSR2 with a snapshot (scale-count.ts).
 */
import { installCounter, SNAPSHOT_DIR_ENV } from './scale-count.js';

await installCounter(process.env[SNAPSHOT_DIR_ENV]);
