/** The core tools a subagent may be given (the reference's safe set); nothing else is offered to one. */
export const SUBAGENT_TOOLS: readonly string[] = [
  "send_signal_message",
  "send_telegram_message",
  "send_whatsapp_message",
  "send_email",
  "manage_files",
  "manage_uploads",
  "run_python",
  "db_search",
];
