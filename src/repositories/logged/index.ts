export {
  type ChangelogChange,
  type ChangelogCheckpoints,
  type ChangelogOffsets,
  type ChangelogSink,
  type ChangelogSource,
  type ChangelogSourceRead,
  MemoryChangelog,
  type UnreadableChange,
} from './changelog.js';
export { LoggedRepository, type LoggedRepositoryOptions } from './logged-repository.js';
export {
  ChangelogRestorer,
  type ChangelogRestorerOptions,
  type RestoreOptions,
  type RestorePlan,
  type RestoreProgress,
  type RestoreResult,
} from './restorer.js';
