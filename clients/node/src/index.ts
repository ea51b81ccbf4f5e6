/**
 * askbus: the Node client of askbusd. Producers `ask()` questions and await the answer; UIs
 * `subscribe()` and answer them; `bridgeMessageBus()` connects a Gemini CLI core MessageBus.
 */

export { ask, Producer } from "./producer.js";
export type {
  AskOptions,
  AskResponse,
  Confirmation,
  ConfirmationReason,
  ConfirmOptions,
  PendingAsk,
  ProducerOptions,
} from "./asking.js";
export {
  subscribe,
  Subscription,
  UiApproval,
  UiRequest,
  Withdrawn,
  type SubscribeOptions,
  type SubscriptionEvents,
  type UiRequestState,
  type UiWithdrawReason,
} from "./ui.js";
export { bridgeContext, bridgeMessageBus, type BridgeHandle, type BridgeOptions, type GeminiConfigLike, type MessageBusLike } from "./gemini.js";
export { buildAnswers, choiceAnswer, multiSelectAnswer, textAnswer, yesNoAnswer } from "./answers.js";
export { defaultSocketPath } from "./paths.js";
export type { ReconnectOptions } from "./backoff.js";
export * from "./errors.js";
export {
  encodeFrame,
  FrameDecoder,
  frames,
  parseServerFrame,
  PROTOCOL_VERSION,
  APPROVAL_MODES,
  CONTEXT_FIELDS,
  contextFromEnv,
  mergeContext,
  type ApprovalMode,
  type RequestContext,
  type SubscribeFilter,
  type Answers,
  type ClientFrame,
  type NoUiPolicy,
  type Outcome,
  type ProducerInfo,
  type Question,
  type QuestionOption,
  type QuestionType,
  type ServerFrame,
  type AckFrame,
  type AnswerFrame,
  type AskFrame,
  type BusEventFrame,
  type DecidedBy,
  type CancelFrame,
  type ErrorFrame,
  type HelloFrame,
  type PongFrame,
  type ProducerResponseFrame,
  type StatsFrame,
  type SubscribedFrame,
  type UiRequestFrame,
  type WatchingFrame,
  type WelcomeFrame,
  type WithdrawnFrame,
  type ToolResult,
  type WithdrawReason,
  TOOL_OUTCOMES,
  type ToolOutcome,
  type ToolCall,
  type ConfirmationDetails,
  type ApprovalOptions,
  type ApprovalResponseFrame,
  type UiApprovalFrame,
  type ApprovalAckFrame,
  type ApprovalWithdrawnFrame,
  type DecisionFrame,
} from "./protocol.js";
