export type {
  ChangelogChange,
  ChangelogCheckpoints,
  ChangelogOffsets,
  ChangelogSink,
  ChangelogSource,
  ChangelogSourceRead,
  UnreadableChange,
} from '../../store/changelog.js';
export { MemoryChangelog } from './changelog.js';
export { LoggedRepository, type LoggedRepositoryOptions } from './logged-repository.js';
export {
  ChangelogRestorer,
  type ChangelogRestorerOptions,
  type RestoreOptions,
  type RestorePlan,
  type RestoreProgress,
  type RestoreResult,
} from './restorer.js';
