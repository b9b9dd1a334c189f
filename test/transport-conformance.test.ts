import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY_ENV } from '../src/shared/provider/config.js';
import type { TransportName } from '../src/shared/provider/transport/types.js';
import { EDGE_SCENARIOS } from './transport-edges.js';
import { fixtures, MULTIBYTE, pinEnv, prepareFixtures } from './transport-fixtures.js';
import { expectOutcome, type Outcome, runThrough, type Scenario } from './transport-run.js';
import { ISSUE_SCENARIOS } from './transport-scenarios.js';
import { completeInTrustingChild, noteAgents, replay, startServer } from './transport-servers.js';

/**
 * The conformance suite of the two transports (issue 11): every scenario runs through `sdk` and
 * `undici` in turn, each against a fresh server (so the scripted model's request ids match), and
 * the two outcomes must be identical AND match what the scenario expects, so a case where both
 * agree on a wrong answer still fails. The servers' ports differ: outcomes show `127.0.0.1:PORT`.
 * (One port for both was tried: the sdk transport's global fetch pool then reused a socket that
 * the first server had closed, a failure of the test's own making.)
 */

const TRANSPORTS: readonly TransportName[] = ['sdk', 'undici'];

/** One table: the issue's list, then the edges past it. */
const SCENARIOS = [...ISSUE_SCENARIOS, ...EDGE_SCENARIOS];

// A key of the real shape, so both the exact-key and the key-shape redactions are in play.
const FAKE_KEY = 'sk-ant-api03-conformance-suite-fake-key-0000000000';
let restoreEnv: () => void = () => {};

beforeAll(async () => {
  const unset = ['ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_BASE_URL', 'ANTHROPIC_CUSTOM_HEADERS'];
  for (const name of ['HTTPS_PROXY', 'HTTP_PROXY', 'NO_PROXY'])
    unset.push(name, name.toLowerCase());
  restoreEnv = pinEnv({
    [API_KEY_ENV]: FAKE_KEY,
    ...Object.fromEntries(unset.map((name) => [name, undefined])),
  });
  await prepareFixtures();
});

afterAll(() => restoreEnv());

describe('the sdk and undici transports give the same outcome', () => {
  it.each(SCENARIOS)('$name', async (scenario) => {
    const outcomes = new Map<TransportName, Outcome>();
    for (const transport of TRANSPORTS)
      outcomes.set(transport, await runThrough(transport, scenario));
    const sdk = outcomes.get('sdk');
    const undici = outcomes.get('undici');
    expect
      .soft(undici, 'the undici outcome (received) against the sdk outcome (expected)')
      .toStrictEqual(sdk);
    for (const [transport, outcome] of outcomes)
      expectOutcome(transport, outcome, scenario.expected);
  });

  // Without this, a provider that ignored `config.transport` would pass every case above.
  it('takes two different paths: the SDK and cohort name themselves in user-agent', async () => {
    const agents: string[] = [];
    const scenario: Scenario = {
      name: 'user-agent',
      serve: () => startServer(noteAgents(agents, replay(fixtures().recorded))),
      expected: { code: 'ok', calls: 1 },
    };
    for (const transport of TRANSPORTS) await runThrough(transport, scenario);
    expect(agents).toEqual([
      expect.stringMatching(/^Anthropic\/JS /),
      expect.stringMatching(/^cohort\//),
    ]);
  });
});

describe('HTTPS with a certificate the process trusts', () => {
  it('answers the same turn through both transports (NODE_EXTRA_CA_CERTS in a child)', async () => {
    const agents: string[] = [];
    const play = noteAgents(agents, replay(fixtures().recorded));
    const server = await startServer(play, { tls: fixtures().tls });
    try {
      const results = await completeInTrustingChild(server.url, fixtures().tls.certPath);
      expect(results.undici, 'the undici result (received) against the sdk result').toStrictEqual(
        results.sdk,
      );
      expect(results.sdk).toMatchObject({ ok: true, calls: 1, turn: { text: MULTIBYTE } });
      // The child ran the built dist/: a stale build would send both through the SDK.
      expect(agents).toEqual([
        expect.stringMatching(/^Anthropic\/JS /),
        expect.stringMatching(/^cohort\//),
      ]);
    } finally {
      await server.close();
    }
  });
});
