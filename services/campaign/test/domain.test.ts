import { EnvReader, InvalidArgumentError } from '@mail/common';
import { readConfig } from '../src/config';
import { nextRunAt } from '../src/domain/schedule';
import { campaignPatch, checkVariantIds, newCampaign, pageWindow } from '../src/domain/validation';

const WORKSPACE = '0b6b5b8e-8a55-4c0e-9d3c-000000000001';
const VARIANT = '6f1c2a4e-9a1b-4c2d-8e3f-0a1b2c3d4e5f';

function violationsOf(check: () => unknown): unknown[] {
  try {
    check();
  } catch (error) {
    if (error instanceof InvalidArgumentError) return error.violations;
    throw error;
  }
  throw new Error('expected a validation failure');
}

describe('config', () => {
  it('defaults DATABASE_URL', () => {
    expect(readConfig(new EnvReader({})).databaseUrl).toBe('postgres://mail:mail@127.0.0.1:25432/mail');
  });
});

describe('next_run_at', () => {
  it('computes the next UTC fire time strictly after now', () => {
    const now = new Date('2026-03-02T09:00:00.000Z');
    expect(nextRunAt('0 9 * * MON-FRI', now)).toEqual(new Date('2026-03-03T09:00:00.000Z'));
    expect(nextRunAt('*/15 * * * *', new Date('2026-03-02T09:07:30.000Z'))).toEqual(new Date('2026-03-02T09:15:00.000Z'));
    expect(nextRunAt(null, now)).toBeNull();
  });

  it('stays right when asked again later or earlier', () => {
    expect(nextRunAt('0 * * * *', new Date('2026-03-02T09:30:00.000Z'))).toEqual(new Date('2026-03-02T10:00:00.000Z'));
    expect(nextRunAt('0 * * * *', new Date('2026-03-02T09:59:59.999Z'))).toEqual(new Date('2026-03-02T10:00:00.000Z'));
    expect(nextRunAt('0 * * * *', new Date('2026-03-02T10:00:00.000Z'))).toEqual(new Date('2026-03-02T11:00:00.000Z'));
    expect(nextRunAt('0 * * * *', new Date('2026-03-02T08:10:00.000Z'))).toEqual(new Date('2026-03-02T09:00:00.000Z'));
  });
});

describe('e-mail addresses (from_email and reply_to, read as Pydantic EmailStr)', () => {
  const withEmail = (email: string) => () =>
    newCampaign({ workspaceId: WORKSPACE, name: 'Mail', fromEmail: email, replyTo: email }, WORKSPACE);

  it.each(['news@example.com', 'first.last+tag@mail.example.co.uk', "o'brien@example.org", 'ünï@exämple.de'])('accepts %s', (email) => {
    expect(withEmail(email)()).toMatchObject({ fromEmail: email, replyTo: email });
  });

  it.each([
    ['no-at-sign', 'An email address must have an @-sign.'],
    ['@example.com', 'There must be something before the @-sign.'],
    ['news@', 'There must be something after the @-sign.'],
    ['news@localhost', 'The part after the @-sign is not valid. It should have a period.'],
    ['a b@example.com', 'The email address contains invalid characters before the @-sign: SPACE.'],
    ['a@b@example.com', "The part after the @-sign contains invalid characters: '@'."],
    ['.a@example.com', 'An email address cannot start with a period.'],
    ['a..b@example.com', 'An email address cannot have two periods in a row.'],
    ['a@exam_ple.com', "The part after the @-sign contains invalid characters: '_'."],
    ['a@-example.com', 'An email address cannot have a hyphen immediately after the @-sign.'],
    ['a@example.test', 'The part after the @-sign is a special-use or reserved name that cannot be used with email.'],
    [`${'a'.repeat(65)}@example.com`, 'The email address is too long before the @-sign (1 character too many).'],
  ])('refuses %j', (email, reason) => {
    const refused = (field: string) => ({
      loc: [field],
      type: 'value_error',
      msg: `value is not a valid email address: ${reason}`,
      input: email,
      ctx: { reason },
    });
    expect(violationsOf(withEmail(email))).toEqual([refused('from_email'), refused('reply_to')]);
  });
});

describe('create', () => {
  it('fills every default', () => {
    expect(newCampaign({ workspaceId: WORKSPACE.toUpperCase(), name: 'Spring' }, WORKSPACE)).toEqual({
      workspaceId: WORKSPACE,
      name: 'Spring',
      description: null,
      isActive: true,
      sendPriority: 100,
      trackOpens: true,
      trackClicks: true,
      scheduleCron: null,
      recipientSource: 'mssql_query',
      mssqlQuery: null,
      csvAccountIds: null,
      providerCategoryId: null,
      fromEmail: null,
      fromName: null,
      replyTo: null,
      deliveryMode: 'single_template',
      templateId: null,
      abTest: null,
      variants: null,
    });
  });

  it('defaults variant fields (weight 1, no label, active) and ignores ids', () => {
    const campaign = newCampaign({ workspaceId: WORKSPACE, name: 'A/B', variants: [{ id: VARIANT, templateId: 't-1' }] }, WORKSPACE);
    expect(campaign.variants).toEqual([{ templateId: 't-1', weight: 1, label: null, isActive: true }]);
    expect(newCampaign({ workspaceId: WORKSPACE, name: 'None', variants: [] }, WORKSPACE).variants).toEqual([]);
  });

  it('reports every failing field at once, in the order of the write shape', () => {
    expect(
      violationsOf(() =>
        newCampaign(
          {
            workspaceId: 'nope',
            sendPriority: 1001,
            scheduleCron: '* * * * * *',
            mssqlQuery: 'DROP TABLE x',
            fromEmail: 'nobody',
            replyTo: 'a@b',
            variants: [{ templateId: '', weight: -1 }],
          },
          WORKSPACE,
        ),
      ),
    ).toEqual([
      {
        loc: ['workspace_id'],
        type: 'value_error',
        msg: 'Value error, workspace_id must match the workspace_id header',
        input: 'nope',
        ctx: { error: {} },
      },
      { loc: ['name'], type: 'missing', msg: 'Field required', input: null },
      {
        loc: ['send_priority'],
        type: 'less_than_equal',
        msg: 'Input should be less than or equal to 1000',
        input: 1001,
        ctx: { le: 1000 },
      },
      {
        loc: ['schedule_cron'],
        type: 'value_error',
        msg: 'Value error, invalid cron expression: expected 5 fields (minute hour day-of-month month day-of-week), got 6',
        input: '* * * * * *',
        ctx: { error: {} },
      },
      {
        loc: ['mssql_query'],
        type: 'value_error',
        msg: 'Value error, mssql_query must be a single read-only SELECT statement; DROP is not allowed',
        input: 'DROP TABLE x',
        ctx: { error: {} },
      },
      {
        loc: ['from_email'],
        type: 'value_error',
        msg: 'value is not a valid email address: An email address must have an @-sign.',
        input: 'nobody',
        ctx: { reason: 'An email address must have an @-sign.' },
      },
      {
        loc: ['reply_to'],
        type: 'value_error',
        msg: 'value is not a valid email address: The part after the @-sign is not valid. It should have a period.',
        input: 'a@b',
        ctx: { reason: 'The part after the @-sign is not valid. It should have a period.' },
      },
      {
        loc: ['variants', 0, 'template_id'],
        type: 'string_too_short',
        msg: 'String should have at least 1 character',
        input: '',
        ctx: { min_length: 1 },
      },
      {
        loc: ['variants', 0, 'weight'],
        type: 'greater_than_equal',
        msg: 'Input should be greater than or equal to 0',
        input: -1,
        ctx: { ge: 0 },
      },
    ]);
  });

  it('bounds the name at 1-200 characters, counting characters not UTF-16 units', () => {
    expect(newCampaign({ workspaceId: WORKSPACE, name: '😀'.repeat(200) }, WORKSPACE).name).toHaveLength(400);
    expect(violationsOf(() => newCampaign({ workspaceId: WORKSPACE, name: '' }, WORKSPACE))).toEqual([
      { loc: ['name'], type: 'string_too_short', msg: 'String should have at least 1 character', input: '', ctx: { min_length: 1 } },
    ]);
    expect(violationsOf(() => newCampaign({ workspaceId: WORKSPACE, name: 'n'.repeat(201) }, WORKSPACE))).toEqual([
      {
        loc: ['name'],
        type: 'string_too_long',
        msg: 'String should have at most 200 characters',
        input: 'n'.repeat(201),
        ctx: { max_length: 200 },
      },
    ]);
  });
  it('refuses NUL characters anywhere, which Postgres text cannot hold', () => {
    const nul = (loc: (string | number)[], input: string) => ({
      loc,
      type: 'value_error',
      msg: 'Value error, text must not contain NUL (\\u0000) characters',
      input,
      ctx: { error: {} },
    });
    expect(
      violationsOf(() =>
        newCampaign(
          {
            workspaceId: WORKSPACE,
            name: 'n',
            description: 'a\u0000',
            csvAccountIds: ['ok', 'b\u0000'],
            variants: [{ templateId: 't\u0000' }],
          },
          WORKSPACE,
        ),
      ),
    ).toEqual([nul(['description'], 'a\u0000'), nul(['csv_account_ids', 1], 'b\u0000'), nul(['variants', 0, 'template_id'], 't\u0000')]);
  });

  it('refuses control characters where a value can end up in a mail header, one entry per field', () => {
    const pattern = '^[^\\x00-\\x1f\\x7f]*$';
    const mismatch = (loc: (string | number)[], input: string) => ({
      loc,
      type: 'string_pattern_mismatch',
      msg: `String should match pattern '${pattern}'`,
      input,
      ctx: { pattern },
    });
    const write = { name: 'Sale\r\n', fromName: 'News\u0000', variants: [{ templateId: 't', label: 'A\u007f' }] };
    const expected = [mismatch(['name'], 'Sale\r\n'), mismatch(['from_name'], 'News\u0000'), mismatch(['variants', 0, 'label'], 'A\u007f')];
    expect(violationsOf(() => newCampaign({ workspaceId: WORKSPACE, ...write }, WORKSPACE))).toEqual(expected);
    expect(violationsOf(() => campaignPatch(write, WORKSPACE))).toEqual(expected);
    expect(newCampaign({ workspaceId: WORKSPACE, name: 'Ünïcödé 😀', fromName: '"News" <x>' }, WORKSPACE).fromName).toBe('"News" <x>');
  });

  it('takes at most 20 variants, and reports a longer list alone, as Pydantic does', () => {
    const variants = (n: number) => Array.from({ length: n }, (_, i) => ({ templateId: i === 0 ? '' : `t-${i}` }));
    expect(violationsOf(() => newCampaign({ workspaceId: WORKSPACE, name: 'n', variants: variants(20) }, WORKSPACE))).toEqual([
      expect.objectContaining({ loc: ['variants', 0, 'template_id'], type: 'string_too_short' }),
    ]);
    const tooLong = {
      loc: ['variants'],
      type: 'too_long',
      msg: 'List should have at most 20 items after validation, not 21',
      input: variants(21).map(({ templateId }) => ({ template_id: templateId })),
      ctx: { field_type: 'List', max_length: 20, actual_length: 21 },
    };
    expect(violationsOf(() => newCampaign({ workspaceId: WORKSPACE, name: 'n', variants: variants(21) }, WORKSPACE))).toEqual([tooLong]);
    expect(violationsOf(() => campaignPatch({ variants: variants(21) }, WORKSPACE))).toEqual([tooLong]);
    const twenty = Array.from({ length: 20 }, (_, i) => ({ templateId: `t-${i}` }));
    expect(newCampaign({ workspaceId: WORKSPACE, name: 'n', variants: twenty }, WORKSPACE).variants).toHaveLength(20);
  });

  it('bounds mssql_query at 20 000 and provider_category_id at 255 characters', () => {
    const query = `SELECT id FROM t WHERE note = '${'x'.repeat(19_968)}'`;
    expect(
      newCampaign({ workspaceId: WORKSPACE, name: 'n', mssqlQuery: query, providerCategoryId: 'c'.repeat(255) }, WORKSPACE).mssqlQuery,
    ).toBe(query);
    expect(
      violationsOf(() =>
        newCampaign({ workspaceId: WORKSPACE, name: 'n', mssqlQuery: `${query} `, providerCategoryId: 'c'.repeat(256) }, WORKSPACE),
      ),
    ).toEqual([
      {
        loc: ['mssql_query'],
        type: 'string_too_long',
        msg: 'String should have at most 20000 characters',
        input: `${query} `,
        ctx: { max_length: 20_000 },
      },
      {
        loc: ['provider_category_id'],
        type: 'string_too_long',
        msg: 'String should have at most 255 characters',
        input: 'c'.repeat(256),
        ctx: { max_length: 255 },
      },
    ]);
  });
});

describe('update', () => {
  it('leaves omitted fields and nulls on fields that cannot be null out, and keeps nulls that clear', () => {
    expect(
      campaignPatch(
        {
          name: null,
          isActive: null,
          sendPriority: null,
          recipientSource: null,
          deliveryMode: null,
          description: null,
          csvAccountIds: null,
          variants: null,
        },
        WORKSPACE,
      ),
    ).toEqual({ description: null, csvAccountIds: null, variants: null });
    expect(campaignPatch({}, WORKSPACE)).toEqual({});
  });

  it('keeps variant ids with the fields given (null leaves those that cannot be null) and fills defaults of new variants', () => {
    const variants = [
      { id: VARIANT, templateId: 't', label: null },
      { id: VARIANT, weight: null, isActive: null, templateId: null, label: 'L' },
      { templateId: 'u', weight: 0, isActive: false },
      { templateId: 'v', weight: null, label: null },
    ];
    expect(campaignPatch({ variants }, WORKSPACE)).toEqual({
      variants: [
        { id: VARIANT, templateId: 't', label: null },
        { id: VARIANT, label: 'L' },
        { templateId: 'u', weight: 0, label: null, isActive: false },
        { templateId: 'v', weight: 1, label: null, isActive: true },
      ],
    });
  });

  it('requires the template_id of a new variant, on update and on create', () => {
    const missing = (i: number, input: object) => ({ loc: ['variants', i, 'template_id'], type: 'missing', msg: 'Field required', input });
    expect(violationsOf(() => campaignPatch({ variants: [{ id: VARIANT }, { weight: 2 }, { templateId: null }] }, WORKSPACE))).toEqual([
      missing(1, { weight: 2 }),
      { loc: ['variants', 2, 'template_id'], type: 'string_type', msg: 'Input should be a valid string', input: null },
    ]);
    expect(violationsOf(() => newCampaign({ workspaceId: WORKSPACE, name: 'x', variants: [{ id: VARIANT }] }, WORKSPACE))).toEqual([
      missing(0, { id: VARIANT }),
    ]);
  });

  it('accepts the workspace acted in, in any case, and refuses another', () => {
    expect(campaignPatch({ workspaceId: WORKSPACE.toUpperCase(), name: 'x' }, WORKSPACE)).toEqual({ name: 'x' });
    expect(violationsOf(() => campaignPatch({ workspaceId: VARIANT }, WORKSPACE))).toEqual([
      {
        loc: ['workspace_id'],
        type: 'value_error',
        msg: 'Value error, workspace_id must match the workspace_id header',
        input: VARIANT,
        ctx: { error: {} },
      },
    ]);
  });

  it('creates only in the workspace acted in', () => {
    expect(violationsOf(() => newCampaign({ workspaceId: VARIANT, name: 'x' }, WORKSPACE))).toEqual([
      {
        loc: ['workspace_id'],
        type: 'value_error',
        msg: 'Value error, workspace_id must match the workspace_id header',
        input: VARIANT,
        ctx: { error: {} },
      },
    ]);
    expect(violationsOf(() => newCampaign({ name: 'x' }, WORKSPACE))).toEqual([
      { loc: ['workspace_id'], type: 'missing', msg: 'Field required', input: null },
    ]);
  });

  it('refuses variant ids of other campaigns and ids listed twice', () => {
    const draft = { templateId: 't', weight: 1, label: null, isActive: true };
    expect(() => checkVariantIds([{ ...draft, id: VARIANT }, draft], new Set([VARIANT]))).not.toThrow();
    expect(
      violationsOf(() =>
        checkVariantIds(
          [
            { ...draft, id: VARIANT.toUpperCase() },
            { ...draft, id: 'x' },
            { ...draft, id: VARIANT },
          ],
          new Set([VARIANT]),
        ),
      ),
    ).toEqual([
      {
        loc: ['variants', 1, 'id'],
        type: 'value_error',
        msg: 'Value error, variant x does not belong to this campaign',
        input: 'x',
        ctx: { error: {} },
      },
      {
        loc: ['variants', 2, 'id'],
        type: 'value_error',
        msg: `Value error, variant ${VARIANT} is listed more than once`,
        input: VARIANT,
        ctx: { error: {} },
      },
    ]);
  });
});

describe('paging', () => {
  it('defaults and caps the window', () => {
    expect(pageWindow(undefined)).toEqual({ page: 1, pageSize: 50, offset: 0 });
    expect(pageWindow({ page: 3, pageSize: 1000 })).toEqual({ page: 3, pageSize: 500, offset: 1000 });
  });
});
