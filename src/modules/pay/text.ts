/**
 * Every English word the pay page shows, in one place for translation. Plain strings with
 * `{name}` placeholders (filled by `fill`), so a translation can be a JSON file of the same
 * shape. Shared by the server render and the browser script.
 */
export const PAY_TEXT = {
  pageTitle: 'Pay {project}',
  notFoundTitle: 'Payment not found',
  notFoundBody:
    'This payment link is not valid. Check the link you were given, or ask the merchant for a new one.',
  tooManyTitle: 'Too many requests',
  tooManyBody:
    'This page was loaded too often from your network. Please wait {seconds} seconds and reload it.',
  testBanner: 'TEST MODE: test network only, no real funds move.',
  orderLabel: 'Order',
  amountLabel: 'Amount due',
  anyAmount: 'Any amount ({currency})',
  transactionLabel: 'Payment reference',
  expiresIn: 'Expires in {time}',
  expiresSoon: 'Expires in {time}. Pay now to keep this price.',
  expiredAlready: 'This payment request has expired.',

  chooseHeading: 'Choose how to pay',
  chooseHint: 'Pick a token and network your wallet holds. You can change it before you pay.',
  tokenNetwork: 'on {network}',
  noTokens:
    'No payment methods are available for this payment right now. Please contact the merchant.',

  payHeading: 'Send exactly this amount',
  payHeadingRest: 'Send the rest',
  payHeadingAny: 'Send any amount of {token}',
  sendLabel: 'Amount',
  sendAnyAmount: 'Any amount of {token}: you choose how much',
  addressLabel: 'To this address',
  networkLabel: 'Network',
  networkValue: '{network} (chain id {chainId})',
  tokenContractLabel: 'Token contract',
  nativeToken: "{token}, the network's own coin",
  copy: 'Copy',
  copyAmount: 'Copy amount',
  copyAddress: 'Copy address',
  copied: 'Copied',
  copiedAmount: 'Amount copied',
  copiedAddress: 'Address copied',
  copyFailed: 'Could not copy. Select the text and copy it yourself.',
  qrAlt: 'QR code of the payment request: {amount} to {address} on {network}',
  qrAltAny: 'QR code of the payment request: any amount of {token} to {address} on {network}',
  qrHint: 'Scan with your wallet app.',
  openWallet: 'Open in wallet app',
  signWallet: 'Pay by signature, no gas needed',
  signHint:
    'For browser wallets that sign typed messages (EIP-712): you sign once and pay the token only; this service pays the network fee. Any other wallet: send the amount to the address above.',
  signWalletBusy: 'Sign the payment in your wallet…',
  signWalletSent: 'Signed. The payment was submitted for you: transaction {hash}',
  browserWallet: 'Pay with browser wallet',
  browserWalletBusy: 'Confirm the payment in your wallet…',
  browserWalletSent: 'Sent from your wallet. Transaction {hash}',
  browserWalletWrongChain:
    'Your wallet does not know {network} (chain id {chainId}). Add it to your wallet, then try again.',
  browserWalletRejected: 'The payment was not sent: it was rejected in the wallet.',
  browserWalletFailed: 'The wallet could not send the payment: {message}',
  testWallet: 'Pay with test wallet',
  testWalletBusy: 'Sending from the test wallet…',
  testWalletSent: 'The test wallet sent the payment. Transaction {hash}',
  confirmSent: 'I have sent it',
  changeToken: 'Change token',
  cancel: 'Cancel payment',
  cancelAsk: 'Cancel this payment?',
  cancelYes: 'Yes, cancel',
  cancelNo: 'No, keep paying',
  partial: 'Received {received} of {total}. Still due: {due}.',
  wrongAsset:
    'Another token arrived at this address. It does not count toward this payment: send {token} on {network} as shown. Contact {project} with the payment reference to get the other token back.',
  warnExact:
    'Send from a wallet you control, on {network} only. Payments on another network or in another token do not count toward this payment.',

  statusCreated: 'Choose a token to see the amount to pay.',
  statusCreatedAny: 'Choose the token you want to pay with.',
  statusPrepared: 'Waiting for your payment.',
  statusPreparedDetail:
    'Send the amount below. This page sees your payment by itself as soon as the network has it: there is nothing else to press.',
  statusPreparedAnyDetail:
    'Send the amount you choose to the address below. This page sees your payment by itself as soon as the network has it: there is nothing else to press.',
  statusPending: 'Waiting for your payment to reach the network.',
  statusPendingDetail:
    'This usually takes under a minute. You can leave this page open; it updates by itself.',
  statusPartial: 'Part of the payment has arrived.',
  statusPartialDetail: 'Send the rest before the request expires.',
  statusProcessing: 'Payment detected.',
  statusProcessingDetail: 'Waiting for it to be included in a block.',
  statusConfirming: 'Payment confirming: {n} of {m} confirmations.',
  statusConfirmingDetail: 'Almost done. The merchant is told as soon as it is confirmed.',
  statusFinalizing:
    'Payment confirming: waiting for the network to finalize its block ({n} confirmations so far).',
  statusCompleted: 'Payment complete. Thank you!',
  statusCompletedRedirect: 'Taking you back to {project}…',
  statusCompletedReceipt: 'Keep this receipt for your records.',
  statusExpired: 'This payment request has expired.',
  statusExpiredDetail:
    'No payment was received in time. If you still want to pay, ask the merchant for a new payment link.',
  statusFailed: 'The payment failed.',
  statusCancelled: 'This payment was cancelled.',
  statusCancelledDetail: 'Nothing will be charged.',
  failedUnderpaid:
    'Not enough arrived before the request expired. Contact {project} with the payment reference to sort out what was received.',
  failedWrongAsset:
    'Only a different token or network than the one chosen arrived before the request expired. Contact {project} with the payment reference to get it back.',
  failedReverted:
    'The transfer was reverted on chain, so nothing arrived. Contact {project} if you need help.',
  failedOther: 'Contact {project} with the payment reference.',

  progressLabel: 'Confirmations',
  stepsLabel: 'Payment progress',
  stepDetected: 'Payment detected',
  stepBlock: 'Waiting for a block',
  stepBlockDone: 'Included in block {block}',
  stepConfirmations: 'Confirmations: {n} of {m}',
  stepFinality: 'Finalized by the network ({n} confirmations so far)',
  stepComplete: 'Complete',
  transactionHashLabel: 'Network transaction',
  receiptHeading: 'Receipt',
  receiptPaid: 'Paid',
  receiptAmount: 'Amount',
  receiptCompletedAt: 'Completed',
  returnToMerchant: 'Return to {project}',
  returnNow: 'Return now',
  stayHere: 'Stay on this page',
  stayingHere: 'You are staying on this page.',
  liveUpdatesLost: 'Live updates were interrupted. Reconnecting…',
  actionFailed: 'Something went wrong: {message}',
  networkError: 'Could not reach the payment service. Check your connection and try again.',
} as const

export type PayText = { [K in keyof typeof PAY_TEXT]: string }

/** Each template split once at its placeholders: text, name, text, name, …, text. */
const compiled = new Map<string, string[]>()

function parts(template: string): string[] {
  let p = compiled.get(template)
  if (!p) {
    p = template.split(/\{(\w+)\}/)
    // The texts are a fixed set, but fill() may be handed any string: keep the cache bounded.
    if (compiled.size < 1_000) compiled.set(template, p)
  }
  return p
}

/** Fills `{name}` placeholders; unknown names stay visible so a missing value is noticed. */
export function fill(template: string, values: Record<string, string | number> = {}): string {
  if (!template.includes('{')) return template
  // Split once per template and joined by hand: a replace() with a callback was ~20% of a pay
  // page's render.
  const p = parts(template)
  let out = p[0]!
  for (let i = 1; i < p.length; i += 2) {
    const name = p[i]!
    out += (name in values ? String(values[name]) : `{${name}}`) + p[i + 1]!
  }
  return out
}
