//! LLM backends (Claude, Gemini, OpenAI-compatible), the agent loop and the
//! media tool of kesoku.
//!
//! Nothing is here yet: the backends arrive with their own issue. The crate
//! exists now so that the facade's layout is final.
