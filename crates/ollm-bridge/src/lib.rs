//! ollm's adapters: each turns a [`ollm_types::ProviderRequest`] into one server's wire
//! format and that server's bytes back into [`ollm_types::ProviderEvent`]s.
//!
//! SKELETON: the adapters arrive with their issues.
