import { Type } from '@sinclair/typebox'
import { SWEEP_STATUSES } from '../../db/schema.ts'
import { StringEnum } from '../../lib/string-enum.ts'
import { Page } from '../refunds/model.ts'
import { closed, TransactionStatus } from '../transactions/model.ts'

const units = (description: string) => Type.String({ pattern: '^[0-9]+$', description })
const EvmAddress = (description: string) =>
  Type.String({ pattern: '^0x[0-9a-fA-F]{40}$', description })
const time = (description: string) =>
  Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description })

export const NetworkToken = Type.Object(
  {
    symbol: Type.String({ description: 'The label customers see (USDC, ETH).' }),
    decimals: Type.Integer(),
    address: Type.Union([EvmAddress('The ERC-20 contract (EIP-55).'), Type.Null()], {
      description: 'Null for the native coin.',
    }),
    native: Type.Boolean(),
    usd_price: Type.Union([Type.String({ pattern: '^[0-9]+(\\.[0-9]+)?$' }), Type.Null()], {
      description:
        'USD per whole token now, as the service quotes it; null when its price cannot be read.',
    }),
  },
  closed,
)

export const NetworkObject = Type.Object(
  {
    name: Type.String({ description: 'The `blockchain_network` value.' }),
    chain_id: Type.Integer(),
    testnet: Type.Boolean({
      description:
        'True: serves test mode; false: live mode. A key sees the networks of its own mode.',
    }),
    confirmations: Type.Integer(),
    finality: StringEnum(['confirmations', 'safe', 'finalized'] as const),
    verified: Type.Boolean({
      description:
        'Checked against its chain; only then are its tokens offered and its payments followed.',
    }),
    eip7702: Type.Union([Type.Boolean(), Type.Null()], {
      description:
        'Whether its chain runs EIP-7702, as its node answered when it was verified (null until then).',
    }),
    money_out_route: Type.Union([StringEnum(['eip7702', 'top-up'] as const), Type.Null()], {
      description:
        "How the treasury tool moves money out of deposit addresses there. eip7702: each address delegates to DepositAccount and the gas account sends one transaction per batch, with no coin sent to deposit addresses. top-up (a chain without EIP-7702): the gas account sends each address exactly its own transfers' fee, in one transaction, and each address sends its own transfers. Null until the network is verified.",
    }),
    tokens: Type.Array(NetworkToken),
  },
  closed,
)

export const NetworksResponse = Type.Object(
  { success: Type.Literal(true), networks: Type.Array(NetworkObject) },
  closed,
)

export const DepositKeyResponse = Type.Object(
  {
    success: Type.Literal(true),
    mode: StringEnum(['test', 'live'] as const),
    fingerprint: Type.String({
      pattern: '^[0-9a-f]{64}$',
      description:
        "SHA-256 of \"crypto-pay deposit key\", a newline and the extended public key this mode's deposit addresses are derived from, in hex. The xpub itself is not handed to API keys: with any one deposit address's private key it would give them all. The treasury tool derives the xpub from the merchant's own key and compares fingerprints.",
    }),
    derivation_path: Type.String({
      description:
        'The path of the account whose key this is in a standard wallet (deposit address i is its child i).',
      examples: ["m/44'/60'/0'/0"],
    }),
    generated: Type.Boolean({
      description:
        'True for a test-mode key the service generated (nobody holds its private key, so its deposit addresses cannot be swept).',
    }),
    addresses_handed_out: Type.Integer(),
  },
  closed,
)

export const DepositAddressObject = Type.Object(
  {
    address: EvmAddress('EIP-55.'),
    derivation_index: Type.Integer({ description: 'Child index under the deposit key.' }),
    transaction_id: Type.String({ format: 'uuid' }),
    transaction_status: TransactionStatus,
    blockchain_network: Type.Union([Type.String(), Type.Null()], {
      description: 'The network the customer chose.',
    }),
    token_symbol: Type.Union([Type.String(), Type.Null()], {
      description: 'The token the customer chose.',
    }),
    amount_received: Type.Union([units('Received in that token, smallest units.'), Type.Null()]),
    swept: Type.Boolean({
      description:
        'Something arrived here, and every arrival (its network and token) was moved on by a confirmed sweep after it.',
    }),
    last_swept_at: time('When a confirmed sweep last took something from it.'),
    created_at: Type.String({ format: 'date-time' }),
  },
  closed,
)

export const DepositAddressList = Type.Object(
  {
    success: Type.Literal(true),
    deposit_addresses: Type.Array(DepositAddressObject),
    has_more: Type.Boolean(),
    next_after: Type.Union([Type.Integer(), Type.Null()], {
      description: 'Pass as `after` for the next page; null on the last page.',
    }),
  },
  closed,
)

export const SweepItem = Type.Object(
  {
    address: EvmAddress('The deposit address (EIP-55).'),
    token_symbol: Type.String(),
    planned: units('What the tool read there when it planned the sweep.'),
    swept: Type.Union([
      units(
        "What the confirmed sweep moved, from its Swept event (0 when that address's call failed).",
      ),
      Type.Null(),
    ]),
  },
  closed,
)

export const SweepObject = Type.Object(
  {
    id: Type.String({ examples: ['swp_3kT9xPq2Vd8sLm4Na7Bc'] }),
    status: StringEnum(SWEEP_STATUSES, {
      description:
        "submitted: sent, not in a block yet; confirming; confirmed (the network's confirmations); failed: reverted; dropped: its nonce went to another transaction, so it can never be mined.",
    }),
    testing_mode: Type.Boolean(),
    blockchain_network: Type.String(),
    treasury: EvmAddress('Where the funds went (EIP-55).'),
    sender: EvmAddress('The gas account that sent and paid for it.'),
    transaction_hash: Type.String({ pattern: '^0x[0-9a-f]{64}$' }),
    raw_transaction: Type.String({
      description: 'The signed transaction as recorded, for sending it again unchanged.',
    }),
    nonce: Type.Integer(),
    block_number: Type.Union([Type.Integer(), Type.Null()]),
    confirmations: Type.Union([Type.Integer(), Type.Null()]),
    gas_used: Type.Union([units('Gas the transaction used.'), Type.Null()]),
    fee: Type.Union([
      units("What the gas account paid, in the native coin's smallest unit."),
      Type.Null(),
    ]),
    items: Type.Array(SweepItem),
    created_at: Type.String({ format: 'date-time' }),
    confirmed_at: time('When it reached its confirmations.'),
  },
  closed,
)

export const RecordSweepBody = Type.Object(
  {
    blockchain_network: Type.String({ maxLength: 64 }),
    raw_transaction: Type.String({
      pattern: '^0x[0-9a-fA-F]+$',
      maxLength: 65_536,
      description:
        'The signed DepositAccount batch transaction, as it is sent to the network: recorded before it is sent.',
    }),
    items: Type.Array(
      Type.Object(
        {
          address: EvmAddress('A deposit address the batch sweeps.'),
          token_symbol: Type.String({ maxLength: 32 }),
          amount: Type.String({
            pattern: '^[0-9]{1,78}$',
            description: 'What the tool read there, smallest units.',
          }),
        },
        { additionalProperties: false },
      ),
      { maxItems: 2000 },
    ),
  },
  { additionalProperties: false },
)

export const SweepResponse = Type.Object(
  { success: Type.Literal(true), sweep: SweepObject },
  closed,
)
export const SweepList = Type.Object(
  { success: Type.Literal(true), sweeps: Type.Array(SweepObject), pagination: Page },
  closed,
)
