import { ClassSerializerInterceptor, Controller, Post, SerializeOptions } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { Exclude, Expose } from 'class-transformer';
import { Idempotent, IdempotencyModule, InMemoryIdempotencyRepository } from 'nestjs-dynamodb-idempotency';
import { PLATFORMS, post, startApp, TestApp } from '../support/app';
import { testClock } from '../support/clock';

class Account {
  id = 'acc_1';
  email = 'a@example.com';
  @Exclude() password = 'hunter2';
  @Exclude({ toPlainOnly: true }) internalNote = 'vip';
  @Expose({ groups: ['admin'] }) riskScore = 7;
}

let runs = 0;

@Controller('accounts')
class AccountsController {
  @Post()
  @Idempotent()
  create(): Account {
    runs += 1;
    return new Account();
  }

  @Post('admin')
  @Idempotent()
  @SerializeOptions({ groups: ['admin'] })
  createAsAdmin(): Account[] {
    runs += 1;
    return [new Account()];
  }
}

describe.each(PLATFORMS)('class instances behind a global ClassSerializerInterceptor on %s', (platform) => {
  let test: TestApp;
  beforeAll(async () => {
    const clock = testClock();
    test = await startApp(
      platform,
      {
        imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository(clock) })],
        controllers: [AccountsController],
        providers: [{ provide: APP_INTERCEPTOR, useClass: ClassSerializerInterceptor }],
      },
      { clock },
    );
  });
  afterAll(() => test.close());

  it('replays the JSON the client received, never the fields the serializer stripped', async () => {
    const before = runs;
    const first = await post(`${test.url}/accounts`, {}, { 'Idempotency-Key': `acc-${platform}` });
    const replay = await post(`${test.url}/accounts`, {}, { 'Idempotency-Key': `acc-${platform}` });
    expect(JSON.parse(first.text)).toEqual({ id: 'acc_1', email: 'a@example.com' });
    expect(replay.text).toBe(first.text);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(runs).toBe(before + 1);
  });

  it('honours @SerializeOptions on the route, for arrays too', async () => {
    const first = await post(`${test.url}/accounts/admin`, {}, { 'Idempotency-Key': `admin-${platform}` });
    const replay = await post(`${test.url}/accounts/admin`, {}, { 'Idempotency-Key': `admin-${platform}` });
    expect(JSON.parse(first.text)).toEqual([{ id: 'acc_1', email: 'a@example.com', riskScore: 7 }]);
    expect(replay.text).toBe(first.text);
  });
});
