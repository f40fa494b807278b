import { DescribeTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { ClockSample } from '../clock-skew.js';

/** The HTTP `Date` header has whole seconds: the server's time lies in `[date, date + 999]` ms. */
const DATE_RESOLUTION_MS = 999;

/** The server's clock from a DescribeTable response's `Date` header (no call returns it), timed with `clock`. */
export async function sampleServerClock(
  client: DynamoDBClient,
  table: string,
  clock: () => number,
): Promise<ClockSample | undefined> {
  let sample: ClockSample | undefined;
  const command = new DescribeTableCommand({ TableName: table });
  command.middlewareStack?.add(
    (next) => async (args) => {
      const localBefore = clock();
      const out = await next(args);
      const localAfter = clock();
      const headers = (out.response as { headers?: Record<string, string | undefined> } | undefined)?.headers;
      const date = Date.parse(headers?.date ?? '');
      if (Number.isFinite(date)) {
        sample = { localBefore, localAfter, serverEarliest: date, serverLatest: date + DATE_RESOLUTION_MS };
      }
      return out;
    },
    // Last of the deserialize step: right around the HTTP call, seeing the raw response.
    { step: 'deserialize', priority: 'low', name: 'idemServerClock' },
  );
  await client.send(command);
  return sample;
}
