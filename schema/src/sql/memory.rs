//! Agent memory: `memory_stores`, `memories`, `memory_versions` (being written).

use async_trait::async_trait;

use super::SqlStore;
use crate::error::StoreResult;
use crate::store::{
    AgentMemoryStore, MemoryActor, MemoryDeletion, MemoryListItem, MemoryQuery, MemoryRow, MemoryStoreQuery,
    MemoryStoreRow, MemoryStoreUpdate, MemoryUpdate, MemoryVersionQuery, MemoryVersionRow, MemoryWrite, NewMemory,
    NewMemoryStore,
};

#[async_trait]
#[allow(unused_variables)]
impl AgentMemoryStore for SqlStore {
    async fn create_memory_store(&self, new: NewMemoryStore) -> StoreResult<MemoryStoreRow> {
        unimplemented!()
    }
    async fn get_memory_store(&self, workspace_id: &str, id: &str) -> StoreResult<Option<MemoryStoreRow>> {
        unimplemented!()
    }
    async fn list_memory_stores(
        &self,
        workspace_id: &str,
        query: &MemoryStoreQuery,
    ) -> StoreResult<Vec<MemoryStoreRow>> {
        unimplemented!()
    }
    async fn update_memory_store(
        &self,
        workspace_id: &str,
        id: &str,
        update: MemoryStoreUpdate,
    ) -> StoreResult<Option<MemoryStoreRow>> {
        unimplemented!()
    }
    async fn archive_memory_store(&self, workspace_id: &str, id: &str) -> StoreResult<Option<MemoryStoreRow>> {
        unimplemented!()
    }
    async fn delete_memory_store(&self, workspace_id: &str, id: &str) -> StoreResult<bool> {
        unimplemented!()
    }
    async fn create_memory(&self, new: NewMemory) -> StoreResult<MemoryWrite> {
        unimplemented!()
    }
    async fn update_memory(&self, update: MemoryUpdate) -> StoreResult<MemoryWrite> {
        unimplemented!()
    }
    async fn delete_memory(&self, deletion: MemoryDeletion) -> StoreResult<MemoryWrite> {
        unimplemented!()
    }
    async fn get_memory(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        memory_id: &str,
        with_content: bool,
    ) -> StoreResult<Option<MemoryRow>> {
        unimplemented!()
    }
    async fn list_memories(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        query: &MemoryQuery,
    ) -> StoreResult<Vec<MemoryListItem>> {
        unimplemented!()
    }
    async fn get_memory_version(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        version_id: &str,
        with_content: bool,
    ) -> StoreResult<Option<MemoryVersionRow>> {
        unimplemented!()
    }
    async fn list_memory_versions(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        query: &MemoryVersionQuery,
    ) -> StoreResult<Vec<MemoryVersionRow>> {
        unimplemented!()
    }
    async fn redact_memory_version(
        &self,
        workspace_id: &str,
        memory_store_id: &str,
        version_id: &str,
        by: MemoryActor,
    ) -> StoreResult<Option<MemoryVersionRow>> {
        unimplemented!()
    }
}
