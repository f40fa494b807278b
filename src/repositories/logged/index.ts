export { type ChangelogChange, type ChangelogSink, MemoryChangelog } from './changelog.js';
export {
  type LocalRecordAccess,
  LoggedRepository,
  type LoggedRepositoryOptions,
} from './logged-repository.js';
