-- Application access tokens die with the API key that issued them (issue 21): a token
-- resolves only while its issuing key is not revoked. Tokens issued before this column
-- (NULL) live out their at most 900 seconds.
ALTER TABLE application_access_tokens ADD COLUMN issued_by_key_id TEXT;
