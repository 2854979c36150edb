-- A new profile: revision 1, no consent answered.
-- $1 id, $2 workspace, $3 organization, $4 name, $5 name key, $6 access type,
-- $7 reference id, $8 onboarded at, $9 account status, $10 country, $11 email hash,
-- $12 entity type, $13 name hash, $14 metadata (JSON), $15 now
INSERT INTO user_profiles (id, workspace_id, organization_id, name, name_key, access_type, reference_id,
                           onboarded_at_ms, account_status, country, email_hash, entity_type, name_hash, metadata,
                           consent_conversation_content, consent_conversation_content_at_ms, consent_activity_record,
                           consent_activity_record_at_ms, revision, created_at_ms, updated_at_ms, deleted_at_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, NULL, NULL, NULL, NULL, 1, $15, $15, NULL)
RETURNING {columns}
