import { sampleOf, scanCostInWords } from './sweep-cost';

describe('what a sweep of a table without the index of keys in flight reads', () => {
  const addIndex = 'aws dynamodb update-table --table-name keys …';

  it('says how many items, megabytes and read units, and how long at the sweep’s pace', () => {
    // 8.6 million items of 1 KB (100 requests a second, 24-hour records): about 4.8 hours at 500 items a second.
    const cost = { indexed: false, itemCount: 8_640_000, sizeBytes: 8_640_000_000, addIndex };
    expect(scanCostInWords(cost, 500)).toEqual({
      text:
        'no index of keys in flight: a sweep reads all 8640000 items of the table (8640.0 MB, about 1054688 read units) ' +
        'in about 17280 s at 500 items a second. Add the index (add_index; docs/scaling.md).',
      warn: false,
    });
  });

  it('says when a sweep cannot finish within its interval: the stuck-PENDING alert cannot hold', () => {
    const statement = scanCostInWords(
      { indexed: false, itemCount: 100_000, sizeBytes: 100_000_000, addIndex },
      500,
      60,
    );
    expect(statement.warn).toBe(true);
    expect(statement.text).toContain(
      'in about 200 s at 500 items a second, longer than its interval (60 s): it cannot finish before the next, and the stuck-PENDING alert cannot hold.',
    );
    expect(scanCostInWords({ indexed: false, itemCount: 20_000, sizeBytes: 1, addIndex }, 500, 60).warn).toBe(false);
  });

  it('has no figures when the table has not been counted (DynamoDB counts about every 6 hours; 0 until then)', () => {
    expect(scanCostInWords({ indexed: false, itemCount: 0 }, 500).text).toBe(
      'no index of keys in flight: a sweep reads every item of the table.',
    );
  });

  it('samples distinct segments, at most as many as there are', () => {
    const sample = sampleOf(10, 4);
    expect(new Set(sample.map(({ index }) => index)).size).toBe(4);
    expect(sample.every(({ index, total }) => total === 10 && index >= 0 && index < 10)).toBe(true);
    expect(sampleOf(2, 4)).toHaveLength(2);
  });

  it('warns when the table could not be described: whether it has the index is not known, so the sweep reads every item', () => {
    expect(scanCostInWords({ indexed: false, undescribed: 'AccessDeniedException' }, 500, 60)).toEqual({
      text:
        'the table could not be described (AccessDeniedException): a sweep cannot tell whether it has the index of keys ' +
        'in flight, and reads every item. Grant dynamodb:DescribeTable (docs/operating.md#iam).',
      warn: true,
    });
  });
});
